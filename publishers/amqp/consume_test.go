package amqp

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestConsumer: Consume subscribes on every host, hands over each message with its host and acks it
// after handle; a dropped connection is resubscribed; Close ends Consume and is idempotent.
func TestConsumer(t *testing.T) {
	fakes := []*fakeBroker{newFake(t, acker), newFake(t, acker)}
	c := DefaultConfig()
	c.URLs = URLs{fakes[0].url(), fakes[1].url()}
	cons, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cons.p.backoff = publishers.Backoff{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond, Healthy: time.Hour}
	var mu sync.Mutex
	got := map[int][]string{}
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Consume(context.Background(), "q", func(d publishers.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			got[d.Host] = append(got[d.Host], string(d.Body))
		})
	}()
	count := func(h int) int { mu.Lock(); defer mu.Unlock(); return len(got[h]) }
	waitFor(t, func() bool {
		select {
		case err := <-ended:
			t.Fatalf("Consume ended: %v", err)
		default:
		}
		return fakes[0].consumerCount() == 1 && fakes[1].consumerCount() == 1
	})
	fakes[0].deliver([]byte("a0"))
	fakes[1].deliver([]byte("b0"))
	fakes[1].deliver([]byte("b1"))
	waitFor(t, func() bool { return count(0) == 1 && count(1) == 2 })
	waitFor(t, func() bool { return fakes[1].ackCount() == 2 })

	fakes[0].dropAll() // killed: the consumer resubscribes
	waitFor(t, func() bool { return fakes[0].consumerCount() == 1 })
	fakes[0].deliver([]byte("a1"))
	waitFor(t, func() bool { return count(0) == 2 })
	mu.Lock()
	if got[0][1] != "a1" || got[1][1] != "b1" {
		t.Errorf("got %v", got)
	}
	mu.Unlock()

	_ = cons.Close()
	_ = cons.Close()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("Consume: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Consume did not end at Close")
	}
	if err := cons.Consume(context.Background(), "q", func(publishers.Delivery) {}); !errors.Is(err, publishers.ErrClosed) {
		t.Fatalf("Consume after Close: %v", err)
	}
}

// TestConsumerStart: a host that cannot be subscribed to fails Consume at once, naming it; a bad topic
// is ErrBadTopic.
func TestConsumerStart(t *testing.T) {
	f := newFake(t, acker)
	c := DefaultConfig()
	c.URLs = URLs{f.url(), "amqp://u:secretpw@127.0.0.1:1/"}
	c.DialTimeout = time.Second
	cons, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	err = cons.Consume(context.Background(), "q", func(publishers.Delivery) {})
	if !errors.Is(err, publishers.ErrUnavailable) || errors.Is(err, publishers.ErrBadTopic) {
		t.Fatalf("Consume with a dead host: %v", err)
	}
	if err := cons.Consume(context.Background(), "amq.x", func(publishers.Delivery) {}); !errors.Is(err, publishers.ErrBadTopic) {
		t.Fatalf("bad topic: %v", err)
	}
}

// TestConsumeEndsWhileSubscribing: a Consume whose context ends while it still subscribes (to a
// server that accepts and never answers) ends like one whose context ended later: nil, not an
// unavailable error (consume.Run's handler cancels once it had its count, maybe before every host
// is subscribed).
func TestConsumeEndsWhileSubscribing(t *testing.T) {
	silent := publishertest.SilentServer(t)
	c := DefaultConfig()
	c.URLs = URLs{"amqp://u:p@" + silent + "/"}
	k, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
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

// TestConsumerCloseHeartbeatingBroker: the consumer's Close is bounded too while the broker
// heartbeats but answers nothing.
func TestConsumerCloseHeartbeatingBroker(t *testing.T) {
	for _, tc := range closeCases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWith(t, tc.opts, acker)
			c := DefaultConfig()
			c.URLs = URLs{f.url()}
			shortHeartbeat(&c)
			cons, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() { ended <- cons.Consume(context.Background(), "q", func(publishers.Delivery) {}) }()
			waitFor(t, func() bool { return f.consumerCount() == 1 })
			if tc.freeze {
				f.freezeAll()
			}
			closesWithin(t, closeWait+time.Second, cons.Close, f.dropAll)
			if err := <-ended; err != nil {
				t.Fatalf("Consume: %v", err)
			}
		})
	}
}
