package nsq

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pubHTTP publishes n messages of size bytes to topic through nsqd's HTTP /pub.
func pubHTTP(t *testing.T, httpAddr, topic string, n, size int) {
	t.Helper()
	body := bytes.Repeat([]byte("x"), size)
	for range n {
		resp, err := http.Post("http://"+httpAddr+"/pub?topic="+topic, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/pub: %s", resp.Status)
		}
	}
}

// TestNSQDMemoryBound: whatever message size and number of topics a client picks, the messages nsqd
// holds in memory stay within MaxMemory once the watcher checked (the fullest queues emptied, with a
// warning); under the bound nothing is dropped.
func TestNSQDMemoryBound(t *testing.T) {
	const maxMsg, maxMem = 64 << 10, 1 << 20
	type batch struct {
		topics, n, size int
	}
	for _, tc := range []struct {
		name      string
		batches   []batch
		wantKept  bool // every message still queued
		wantEmpty bool // a queue was emptied, with a warning
	}{
		{"largest messages, one topic: the rest on disk", []batch{{1, 40, maxMsg}}, true, false},
		{"largest messages, many topics", []batch{{20, 16, maxMsg}}, false, true},
		{"mid-size messages, many topics", []batch{{30, 16, 16 << 10}}, false, true},
		{"small messages, many topics: under the bound", []batch{{30, 16, 100}}, true, false},
		{"large messages, then small ones to the same topics", []batch{{20, 16, maxMsg}, {20, 200, 10}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := StartNSQDWith(1, NSQDOptions{MaxMsgSize: maxMsg, MaxDisk: 1 << 30, MaxMemory: maxMem, CheckEvery: time.Hour, MemCheckEvery: time.Hour},
				slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var logs bytes.Buffer // check runs here, not on the watcher's goroutine: no lock needed
			w := e.mem[0]
			w.log = slog.New(slog.NewTextHandler(&logs, nil))
			var sent int64
			for _, b := range tc.batches {
				for i := range b.topics {
					pubHTTP(t, e.HTTPAddrs()[0], fmt.Sprintf("t%d", i), b.n, b.size)
					sent += int64(b.n)
				}
				w.check() // what the watcher does every MemCheckEvery
			}
			// The bytes really in memory: each topic's queue holds its oldest messages, so count them
			// from the batches in order.
			var inMemory, depth int64
			for _, ts := range e.nodes[0].GetStats("", "", false).Topics {
				left := ts.Depth - ts.BackendDepth
				depth += ts.Depth
				for _, b := range tc.batches {
					n := min(left, int64(b.n))
					inMemory += n * int64(b.size)
					left -= n
				}
			}
			if inMemory > maxMem {
				t.Errorf("%d bytes in memory after the check, over MaxMemory %d", inMemory, maxMem)
			}
			if kept := depth == sent; kept != tc.wantKept {
				t.Errorf("%d of %d messages still queued, want all kept: %v", depth, sent, tc.wantKept)
			}
			warned := strings.Contains(logs.String(), "over its memory budget (nsq.embedded_max_memory)")
			if warned != tc.wantEmpty {
				t.Errorf("warned %v, want %v:\n%s", warned, tc.wantEmpty, logs.String())
			}
		})
	}
}

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
	e, err := StartNSQDWith(1, NSQDOptions{MaxMsgSize: 1 << 20, MaxDisk: maxDisk, MaxMemory: 10 << 20, CheckEvery: time.Hour},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pub := func(topic string, n, size int) { t.Helper(); pubHTTP(t, e.HTTPAddrs()[0], topic, n, size) }
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
