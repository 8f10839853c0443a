package publishertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Freeze stops process pid (a real broker) with SIGSTOP and returns only once every one of its threads
// has stopped: SIGSTOP is delivered asynchronously, and on a busy machine a thread of the broker can go
// on answering for a while (a new-machine CI run saw two of the real brokers acknowledge publishes
// sent 30 ms after the signal, failing "stalled broker" checks).
func Freeze(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	end := time.Now().Add(10 * time.Second)
	for {
		err := stopped(pid)
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("process %d not stopped within 10s after SIGSTOP: %v", pid, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopped reports an error unless every thread of process pid is stopped (state T or t in /proc).
func stopped(pid int) error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("no threads of process %d: %v", pid, err)
	}
	for _, task := range tasks {
		raw, err := os.ReadFile(task)
		if err != nil {
			return err
		}
		// The state follows the command name, which is in parentheses and may contain anything.
		rest := string(raw[strings.LastIndexByte(string(raw), ')')+1:])
		if f := strings.Fields(rest); len(f) == 0 || (f[0] != "T" && f[0] != "t") {
			return fmt.Errorf("thread %s is running", task)
		}
	}
	return nil
}
