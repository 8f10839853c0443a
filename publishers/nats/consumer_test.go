package nats_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestConsumer: a consumer started before anything was published gets every message published to each
// host once, with the host it came from, with JetStream and with core NATS.
func TestConsumer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		jetstream bool
	}{{"jetstream", true}, {"core", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := embedded(t, 2)
			c := nats.DefaultConfig()
			c.Servers = e.Addrs()
			c.JetStream = tc.jetstream
			k, err := nats.NewConsumer(c, publishers.ConsumerOptions{}, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close() })
			p := open(t, e.Addrs(), func(pc *nats.Config) { pc.JetStream = tc.jetstream })
			topic := "consumed"
			var mu sync.Mutex
			got := map[string]int{}
			subscribed := make(chan struct{})
			cctx, cancel := context.WithCancel(context.Background())
			ended := make(chan error, 1)
			go func() {
				ended <- k.Consume(cctx, topic, func(d publishers.Delivery) {
					mu.Lock()
					got[fmt.Sprintf("%d %s", d.Host, d.Body)]++
					mu.Unlock()
				})
			}()
			close(subscribed)
			want := map[string]int{}
			testwait.For(t, 10*time.Second, "a probe consumed from every host", func() bool {
				// core NATS delivers only once subscribed, and the consumer subscribes to each host
				// on its own: probe every host until the consumer has seen one from each
				mu.Lock()
				missing := []int{}
				for host := range 2 {
					if got[fmt.Sprintf("%d probe", host)] == 0 {
						missing = append(missing, host)
					}
				}
				mu.Unlock()
				for _, host := range missing {
					if err := p.Publish(ctx(t), host, topic, []byte("probe")); err != nil {
						t.Log(err)
					}
				}
				return len(missing) == 0
			})
			mu.Lock()
			clear(got)
			mu.Unlock()
			for host := range 2 {
				for i := range 5 {
					body := fmt.Sprintf("m%d", i)
					if err := p.Publish(ctx(t), host, topic, []byte(body)); err != nil {
						t.Fatal(err)
					}
					want[fmt.Sprintf("%d %s", host, body)] = 1
				}
			}
			testwait.For(t, 10*time.Second, "every message consumed", func() bool {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for key := range want {
					n += min(got[key], 1)
				}
				return n == len(want)
			})
			mu.Lock()
			for key, n := range got {
				if want[key] != n && !strings.HasSuffix(key, " probe") {
					t.Errorf("%q consumed %d times, want %d", key, n, want[key])
				}
			}
			mu.Unlock()
			cancel()
			if err := <-ended; err != nil {
				t.Errorf("Consume: %v", err)
			}
		})
	}
}

// TestConsumeEndsWhileSubscribing: a Consume whose context ends while it still subscribes (here to a
// server that accepts and never says INFO, the connect running into dial_timeout) ends like one whose
// context ended later: nil, not "unavailable: context canceled" (consume.Run's handler cancels once it
// had its count, maybe before the last host is subscribed).
func TestConsumeEndsWhileSubscribing(t *testing.T) {
	e := embedded(t, 1)
	silent := publishertest.SilentServer(t)
	c := nats.DefaultConfig()
	c.Servers = []string{e.Addrs()[0], silent}
	k, err := nats.NewConsumer(c, publishers.ConsumerOptions{}, publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	cctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := k.Consume(cctx, "ending", func(publishers.Delivery) {}); err != nil {
		t.Fatalf("Consume whose context ended while it subscribed: %v, want nil", err)
	}
}
