package nsq

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/lograte"
	"github.com/mqtarget/mqtarget/internal/logtest"
)

// TestNSQDDiskFullLogs: with its disk full, nsqd logs an error for every message it cannot write; the
// embedded nsqd's log holds a few of them, not one per message. The queue file is /dev/full, which
// fails every write with ENOSPC, as a full disk does; one MPUB fills the memory queue (nsqd's default
// 10000 messages) first.
func TestNSQDDiskFullLogs(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	log, logs := logtest.Logger()
	e, err := StartNSQDWith(1, NSQDOptions{MaxMsgSize: 1 << 20}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := os.Symlink("/dev/full", filepath.Join(e.dir, "0", "full.diskqueue.000000.dat")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+e.HTTPAddrs()[0]+"/mpub?topic=full", "application/octet-stream",
		bytes.NewReader(bytes.Repeat([]byte("m\n"), 10000)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/mpub of what fits in memory: %s", resp.Status)
	}
	const n = 300
	failed := 0
	for range n {
		resp, err := http.Post("http://"+e.HTTPAddrs()[0]+"/pub?topic=full", "application/octet-stream", bytes.NewReader([]byte("m")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed++
		}
	}
	if failed < n {
		t.Fatalf("%d of %d publishes failed: the disk is not full", failed, n)
	}
	lines := logs.Lines()
	full := 0
	for _, l := range lines {
		if strings.Contains(l, "no space left on device") {
			full++
		}
	}
	t.Logf("%d publishes failed, %d lines logged, %d of them on the full disk", failed, len(lines), full)
	if full == 0 {
		t.Fatalf("no line says the disk is full: %q", lines)
	}
	if len(lines) > 6 {
		t.Errorf("%d lines for %d failed publishes within %v, want a few:\n%s", len(lines), failed, lograte.Interval, strings.Join(lines, "\n"))
	}
}

// TestNSQDLoggerCause: nsqd's lines are told apart by their cause, not by the topic or client they
// name.
func TestNSQDLoggerCause(t *testing.T) {
	log, logs := logtest.Logger()
	l := newNSQDLogger(log)
	start := time.Now()
	for i := range 1000 {
		topic := []string{"a", "b", "c"}[i%3]
		_ = l.Output(2, "ERROR: TOPIC("+topic+") ERROR: failed to write message to backend - write /tmp/x/"+topic+".diskqueue.000000.dat: no space left on device")
		_ = l.Output(2, "ERROR: DISKQUEUE("+topic+") failed to sync - sync: no space left on device")
		_ = l.Output(2, "ERROR: [127.0.0.1:"+string(rune('0'+i%10))+"] - E_BAD_BODY")
	}
	if time.Since(start) >= lograte.Interval {
		t.Skip("too slow to be within one interval")
	}
	if got := logs.Lines(); len(got) != 3 {
		t.Errorf("%d lines, want one per cause (3):\n%s", len(got), strings.Join(got, "\n"))
	}
}
