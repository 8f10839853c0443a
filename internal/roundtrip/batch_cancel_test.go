package roundtrip_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/publishers"
)

// cancelAfter calls cancel right after the n-th measured message (size bytes to topic; the probes are
// smaller, the echo's acks go to another topic) was published: a Ctrl-C at that point.
type cancelAfter struct {
	memPub
	topic   string
	size, n int64
	count   atomic.Int64
	cancel  context.CancelFunc
}

func (p *cancelAfter) Publish(ctx context.Context, host int, topic string, body []byte) error {
	err := p.memPub.Publish(ctx, host, topic, body)
	if topic == p.topic && int64(len(body)) == p.size && p.count.Add(1) == p.n {
		p.cancel()
	}
	return err
}

// probesOnly passes on the acks of probes only (smaller than size): every measured ack is lost.
type probesOnly struct {
	*memConsumer
	size int
}

func (c probesOnly) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	return c.memConsumer.Consume(ctx, topic, func(d publishers.Delivery) {
		if len(d.Body) != c.size {
			handle(d)
		}
	})
}

// TestBatchCancelled: a batch whose ctx ends while it sends, once everything was sent, or while it
// listens for trailing duplicates, returns the ctx's error and no Result.
func TestBatchCancelled(t *testing.T) {
	const count, size = 200, 100
	cases := []struct {
		name      string
		cancelAt  int64 // measured publishes; 0: when every ack came back
		dropAcks  bool
		producers int
	}{
		{name: "while sending, one producer", cancelAt: 10, producers: 1},
		{name: "while sending, four producers", cancelAt: 10, producers: 4},
		{name: "after the last publish, no ack back", cancelAt: count, dropAcks: true, producers: 1},
		{name: "during the grace period", producers: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newMemBroker(1, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var pub publishers.Publisher = memPub{b}
			if c.cancelAt > 0 {
				pub = &cancelAfter{memPub: memPub{b}, topic: "t", size: size, n: c.cancelAt, cancel: cancel}
			}
			var acks publishers.Consumer = newMemConsumer(b)
			if c.dropAcks {
				acks = probesOnly{newMemConsumer(b), size}
			}
			echo := &roundtrip.EchoOptions{Consumer: newMemConsumer(b), Handoff: roundtrip.Queue, Workers: 2}
			r, err := roundtrip.Batch(ctx, roundtrip.BatchOptions{Broker: "mem", Publisher: pub, Acks: acks, Echo: echo,
				Topic: "t", Count: count, Size: size, Producers: c.producers, Wait: time.Minute, Grace: time.Minute, ProbeWait: 10 * time.Second,
				Progress: func(p roundtrip.Progress) {
					if c.cancelAt == 0 && p.Acked == count {
						cancel()
					}
				}})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err %v, want context.Canceled (result %+v)", err, r)
			}
		})
	}
}
