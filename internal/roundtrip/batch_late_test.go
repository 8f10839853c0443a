package roundtrip_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// countAcks closes all once n acks of size bytes (the measured ones, not the probes') were delivered.
type countAcks struct {
	*memConsumer
	size, n int
	mu      sync.Mutex
	seen    int
	all     chan struct{}
}

func (c *countAcks) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	return c.memConsumer.Consume(ctx, topic, func(d publishers.Delivery) {
		handle(d)
		if len(d.Body) != c.size {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.seen++; c.seen == c.n {
			close(c.all)
		}
	})
}

// redeliverLate is the echo's consumer; once after, it delivers late again from a goroutine of its own,
// as an at-least-once broker's client redelivers, unsynchronised with whoever reads what the echo saw.
type redeliverLate struct {
	*memConsumer
	after <-chan struct{}
	late  []byte
	once  sync.Once
}

func (c *redeliverLate) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	c.once.Do(func() {
		wg.Go(func() {
			select {
			case <-c.after:
			case <-ctx.Done():
				select {
				case <-c.after: // came before the end: still redelivered
				default:
					return
				}
			}
			handle(publishers.Delivery{Topic: topic, Body: c.late, Received: time.Now()})
		})
	})
	return c.memConsumer.Consume(ctx, topic, handle)
}

// TestBatchLateEchoDelivery: a message reaching the in-process echo while Batch reads the echo's
// timings (here: during its grace period, after every ack came back) is no data race. Run it with
// -race: the race is what it checks.
func TestBatchLateEchoDelivery(t *testing.T) {
	const count, size = 20, 100
	b := newMemBroker(1, 0)
	src := message.NewSource()
	late := src.Build(src.NextID(), size)
	lateID, _, _ := message.Parse(late)
	acks := &countAcks{memConsumer: newMemConsumer(b), size: size, n: count, all: make(chan struct{})}
	echo := &roundtrip.EchoOptions{Consumer: &redeliverLate{memConsumer: newMemConsumer(b), after: acks.all, late: late},
		Handoff: roundtrip.Queue, Workers: 1}
	roundtrip.SetCopies(echo, func(id string, _ int) int { // its ack, through the correlator, would order the redelivery before Batch's read
		if id == lateID {
			return 0
		}
		return 1
	})
	r, err := roundtrip.Batch(context.Background(), roundtrip.BatchOptions{Broker: "mem", Publisher: memPub{b}, Acks: acks, Echo: echo,
		Topic: "t", Count: count, Size: size, Producers: 1, Wait: 10 * time.Second, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.EchoMaxLatencyMs <= 0 {
		t.Errorf("result %+v, want every ack back once and the echo's timings", r)
	}
}
