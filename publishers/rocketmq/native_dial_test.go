package rocketmq

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestRMQNativeSlowDialOutlivesItsCaller: a publish ends at its own deadline even while another
// publish's dial to the same broker is slow, and that dial is the slot's, bounded by rmqDialTimeout,
// not by the caller who started it: a handshake slower than every caller's deadline still connects
// the broker for the callers after it, with one connection, not one per caller.
func TestRMQNativeSlowDialOutlivesItsCaller(t *testing.T) {
	const handshake = 300 * time.Millisecond
	setup := func(t *testing.T) (*Native, *atomic.Int32) {
		f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte { return rmqTestResponse(0, q.opaque, "", false) })
		front, tc, accepted := publishertest.SlowTLSFront(t, f.ln.Addr().String(), handshake)
		p := newTestRMQNative(t, f, 5*time.Second, "t")
		p.admin.TLS = tc
		p.brokers[0].Addr = front
		return p, accepted
	}
	short := func(p *Native) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := p.Publish(ctx, 0, "t", []byte("m"))
		return time.Since(start), err
	}

	t.Run("a short caller behind a long caller's dial", func(t *testing.T) {
		p, accepted := setup(t)
		first := make(chan error, 1)
		go func() { first <- p.Publish(context.Background(), 0, "t", []byte("m")) }()
		for accepted.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		if took, err := short(p); !errors.Is(err, publishers.ErrTimeout) || took > 200*time.Millisecond {
			t.Errorf("a 50 ms publish: %v after %v, want a timeout at its own deadline", err, took)
		}
		if err := <-first; err != nil {
			t.Errorf("the publish that waits long enough: %v", err)
		}
	})
	t.Run("every caller shorter than the handshake", func(t *testing.T) {
		p, accepted := setup(t)
		deadline := time.Now().Add(5 * time.Second)
		for {
			took, err := short(p)
			if err == nil {
				break
			}
			if !errors.Is(err, publishers.ErrTimeout) || took > 200*time.Millisecond {
				t.Fatalf("a 50 ms publish while the broker is dialled: %v after %v, want a timeout at its own deadline", err, took)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no 50 ms publish succeeded within 5 s: a %v handshake never finishes for them (%d connections)", handshake, accepted.Load())
			}
		}
		if n := accepted.Load(); n != 1 {
			t.Errorf("%d connections, want 1: a caller that leaves neither abandons the dial nor starts another", n)
		}
	})
}
