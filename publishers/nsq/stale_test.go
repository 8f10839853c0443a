//go:build unix

package nsq

import (
	"bufio"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets TestStaleDirOfAKilledProcess run this test binary as the process it kills.
func TestMain(m *testing.M) {
	if os.Getenv("EMBEDDED_TEST_CHILD") == "1" {
		e, err := StartNSQD(1, 1<<20, slog.New(slog.DiscardHandler))
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(e.dir + "\n")
		time.Sleep(time.Minute) // killed long before
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStaleDirOfAKilledProcess: the data directory of an embedded nsqd whose process was killed with
// SIGKILL is removed at the next start; a live process's is not.
func TestStaleDirOfAKilledProcess(t *testing.T) {
	tmp := t.TempDir()
	child := func() (*exec.Cmd, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "EMBEDDED_TEST_CHILD=1", "TMPDIR="+tmp)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		return cmd, strings.TrimSpace(line)
	}
	killed, stale := child()
	_, live := child()
	if err := killed.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = killed.Wait()
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the killed process's directory: %v", err)
	}
	foreign := filepath.Join(tmp, dataDirPrefix+"old") // an older version's: no lock file
	if err := os.MkdirAll(foreign, 0o700); err != nil {
		t.Fatal(err)
	}

	t.Setenv("TMPDIR", tmp)
	e, err := StartNSQD(1, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// nsqd v1.3.0's Exit races with a Main that has not started all its goroutines yet: publish once
	// before Close, as the other tests do.
	pubHTTP(t, e.HTTPAddrs()[0], "t", 1, 1)
	for _, tc := range []struct {
		name, dir string
		kept      bool
	}{
		{"killed process", stale, false},
		{"live process", live, true},
		{"no lock file", foreign, true},
		{"this process", e.dir, true},
	} {
		_, err := os.Stat(tc.dir)
		if kept := err == nil; kept != tc.kept {
			t.Errorf("%s: %s kept %v, want %v", tc.name, tc.dir, kept, tc.kept)
		}
	}
}

// TestDataDirBeingSetUp: a directory whose lock is free but whose marker is not written yet (its
// process is between creating and locking it) is not removed.
func TestDataDirBeingSetUp(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, dataDirPrefix+"new")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, lockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removeStaleDirs(tmp, slog.New(slog.DiscardHandler))
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a directory being set up was removed: %v", err)
	}
}
