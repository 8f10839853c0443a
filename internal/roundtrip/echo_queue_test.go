package roundtrip

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
)

// gatedPub holds every ack publish until open is closed (or the publish's ctx ends).
type gatedPub struct {
	publishers.Publisher
	open      chan struct{}
	published atomic.Int64
}

func (p *gatedPub) Publish(ctx context.Context, _ int, _ string, _ []byte) error {
	select {
	case <-p.open:
		p.published.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (*gatedPub) Hosts() []string            { return []string{"h"} }
func (*gatedPub) ValidateTopic(string) error { return nil }

// floodConsumer delivers n messages of size bytes as fast as the handler takes them, as a broker
// client's reader does; a message counts as confirmed once the handler returned.
type floodConsumer struct {
	n, size            int
	entered, confirmed atomic.Int64
}

func (c *floodConsumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	for range c.n {
		if ctx.Err() != nil {
			return nil
		}
		c.entered.Add(1)
		handle(publishers.Delivery{Topic: topic, Body: make([]byte, c.size), Received: time.Now()})
		c.confirmed.Add(1)
	}
	<-ctx.Done()
	return nil
}
func (*floodConsumer) Hosts() []string { return nil }
func (*floodConsumer) Close() error    { return nil }

// len is how many deliveries are queued.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// closeWithin fails t when e.Close does not return within d.
func closeWithin(t *testing.T, e *Echo, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Close()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Echo.Close did not return within %v", d)
	}
}

// TestEchoQueueBounded: with the queue handoff, messages arriving faster than the acks go out fill the
// queue up to its count or byte bound (a larger message alone), then the consumer's handler waits, so
// the next message stays unconfirmed; once the acks flow every message is echoed. Close ends a
// handler waiting for room.
func TestEchoQueueBounded(t *testing.T) {
	const n = 20
	cases := []struct {
		name     string
		maxItems int
		maxBytes int64
		size     int
		held     int // in the queue while the worker's publish is held
	}{
		{name: "by count", maxItems: 3, maxBytes: 1 << 20, size: 100, held: 3},
		{name: "by bytes", maxItems: 100, maxBytes: 250, size: 100, held: 2},
		{name: "a message larger than the byte bound", maxItems: 100, maxBytes: 50, size: 100, held: 1},
	}
	for _, c := range cases {
		for _, release := range []bool{true, false} {
			name := c.name + map[bool]string{true: ", then the acks flow", false: ", then Close"}[release]
			t.Run(name, func(t *testing.T) {
				pub := &gatedPub{open: make(chan struct{})}
				cons := &floodConsumer{n: n, size: c.size}
				e, err := StartEcho(EchoOptions{Consumer: cons, Publisher: pub, Topics: []string{"t"}, Handoff: Queue, Workers: 1,
					QueueMaxMessages: c.maxItems, QueueMaxBytes: c.maxBytes, Timeout: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				// The worker holds one message in its publish, the queue c.held, the handler the next.
				want := int64(c.held + 1)
				testwait.For(t, 5*time.Second, "the consumer's handler waiting on a full queue", func() bool {
					return cons.confirmed.Load() == want && cons.entered.Load() == want+1
				})
				if got := e.queue.len(); got != c.held {
					t.Errorf("queue holds %d, want %d", got, c.held)
				}
				if release {
					close(pub.open)
					testwait.For(t, 5*time.Second, "every message confirmed and echoed", func() bool {
						return cons.confirmed.Load() == n && pub.published.Load() == n
					})
				}
				closeWithin(t, e, 5*time.Second)
			})
		}
	}
}
