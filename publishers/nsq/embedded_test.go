package nsq

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
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

// TestEmbeddedAckChannelKeepsBacklog: a round trip's ack consumer that falls behind (a busy CPU; here
// a handler that blocks) gets every ack from the embedded nsqd once it catches up. Its memory queues
// hold embedded_max_memory / message.max_size messages (64 by default) and an ephemeral channel has no
// disk queue, so under the name a real nsqd's ack group gets, acks past RDY and that queue were
// dropped, and the round trip counted them lost.
func TestEmbeddedAckChannelKeepsBacklog(t *testing.T) {
	// Past the consumer's RDY (nsqMaxInFlight) and the default memory queue.
	const n = nsqMaxInFlight + 500
	for _, tc := range []struct {
		name     string
		embedded bool
		wantAll  bool
	}{
		{"embedded: durable, the backlog on disk", true, true},
		{"a real nsqd's ephemeral name: the backlog dropped", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DefaultConfig()
			e, err := StartNSQDWith(1, NSQDOptions{MaxMsgSize: 1 << 20, MaxDisk: d.EmbeddedMaxDisk, MaxMemory: d.EmbeddedMaxMemory},
				slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			cfg := DefaultConfig()
			cfg.Hosts = e.TCPAddrs()
			cons, err := NewConsumer(cfg, publishers.ConsumerOptions{Group: Broker.AckGroup("acks", tc.embedded)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			release := make(chan struct{})
			var mu sync.Mutex
			got := map[string]int{}
			ctx, cancel := context.WithCancel(context.Background())
			ended := make(chan error, 1)
			go func() {
				ended <- cons.Consume(ctx, "acks", func(d publishers.Delivery) {
					<-release
					mu.Lock()
					got[string(d.Body)]++
					mu.Unlock()
				})
			}()
			defer func() { cancel(); <-ended }()
			node := e.nodes[0]
			waitFor(t, "the channel", func() bool {
				ts := node.GetStats("acks", "", true).Topics
				return len(ts) == 1 && len(ts[0].Channels) == 1 && len(ts[0].Channels[0].Clients) == 1
			})
			pub, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			for i := range n {
				if err := pub.Publish(context.Background(), 0, "acks", fmt.Appendf(nil, "m%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			// Every message handed from the topic to the channel (where an ephemeral one drops what its
			// memory cannot take) before the consumer catches up.
			waitFor(t, "the topic's queue to empty", func() bool {
				tp, _ := node.GetExistingTopic("acks")
				return tp.Depth() == 0
			})
			close(release)
			waitFor(t, "the channel to drain", func() bool {
				ch := node.GetStats("acks", "", true).Topics[0].Channels[0]
				return ch.Depth == 0 && ch.InFlightCount == 0
			})
			mu.Lock()
			defer mu.Unlock()
			for b, k := range got {
				if k != 1 {
					t.Errorf("%s consumed %d times", b, k)
				}
			}
			if all := len(got) == n; all != tc.wantAll {
				t.Errorf("consumed %d of %d messages, want all: %v", len(got), n, tc.wantAll)
			}
		})
	}
}

// waitFor waits for cond up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 20*time.Second, what, cond)
}
