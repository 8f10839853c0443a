package embedded

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.diskqueue.*.dat"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestNSQDDiskBound: messages nobody consumes spill to disk past the memory queue; beyond MaxDisk the
// largest queue is emptied (with a warning) and a small queue keeps its messages.
func TestNSQDDiskBound(t *testing.T) {
	const maxDisk = 1 << 20
	e, err := StartNSQDWith(1, NSQDOptions{MaxMsgSize: 1 << 20, MaxDisk: maxDisk, MemQueueSize: 10, CheckEvery: time.Hour},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pub := func(topic string, n, size int) {
		t.Helper()
		body := bytes.Repeat([]byte("x"), size)
		for range n {
			resp, err := http.Post("http://"+e.HTTPAddrs()[0]+"/pub?topic="+topic, "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/pub: %s", resp.Status)
			}
		}
	}
	pub("small", 15, 100)  // 10 in memory, 5 on disk: a few hundred bytes
	pub("big", 40, 64<<10) // 10 in memory, 30 on disk: about 2 MiB
	dir := filepath.Join(e.dir, "0")
	if n := diskBytes(t, dir); n <= maxDisk {
		t.Fatalf("%d bytes on disk before the check, want more than %d", n, maxDisk)
	}
	var logs bytes.Buffer // check runs here, not on the watcher's goroutine: no lock needed
	e.disk[0].log = slog.New(slog.NewTextHandler(&logs, nil))
	e.disk[0].check() // what the watcher does every CheckEvery
	if n := diskBytes(t, dir); n > maxDisk {
		t.Errorf("%d bytes on disk after the bound acted, want at most %d", n, maxDisk)
	}
	depth := func(name string) int64 {
		topic, err := e.nodes[0].GetExistingTopic(name)
		if err != nil {
			t.Fatal(err)
		}
		return topic.Depth()
	}
	if d := depth("big"); d != 0 {
		t.Errorf("topic big: depth %d after it was emptied", d)
	}
	if d := depth("small"); d != 15 {
		t.Errorf("topic small: depth %d, want its 15 messages kept", d)
	}
	if !strings.Contains(logs.String(), "over its disk budget") || !strings.Contains(logs.String(), "emptied=[big]") {
		t.Errorf("the warning does not name the emptied queue:\n%s", logs.String())
	}
}
