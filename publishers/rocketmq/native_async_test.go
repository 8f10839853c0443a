package rocketmq

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestRMQNativeAsyncCloseWhileDialling: async publishes that wait for a connection whose TLS handshake
// never comes return at once; Close ends the dial and them promptly, each done getting ErrClosed exactly
// once before Close returns.
func TestRMQNativeAsyncCloseWhileDialling(t *testing.T) {
	f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte { return rmqTestResponse(0, q.opaque, "", false) })
	p := newTestRMQNative(t, f, 20*time.Second, "t")
	p.admin.TLS = &tls.Config{}
	p.brokers[0].Addr = publishertest.SilentServer(t)
	const n = 5
	var mu sync.Mutex
	calls := make([][]error, n)
	for i := range n {
		start := time.Now()
		err := p.PublishAsync(0, "t", []byte("m"), func(err error) {
			mu.Lock()
			calls[i] = append(calls[i], err)
			mu.Unlock()
		})
		if took := time.Since(start); took > 100*time.Millisecond || err != nil {
			t.Fatalf("async publish %d: %v after %v, want it taken at once while the connection is made", i, err, took)
		}
	}
	start := time.Now()
	_ = p.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with async publishes waiting for a dial", took)
	}
	check := func(when string) {
		mu.Lock()
		defer mu.Unlock()
		for i, errs := range calls {
			if len(errs) != 1 || !errors.Is(errs[0], publishers.ErrClosed) {
				t.Errorf("%s: async publish %d: done(%v), want done(ErrClosed) once", when, i, errs)
			}
		}
	}
	check("when Close returned")
	time.Sleep(200 * time.Millisecond)
	check("later")
	if got := len(f.requests()); got != 0 {
		t.Errorf("%d requests reached the broker, want none", got)
	}
}

// TestRMQNativeCloseWaitsForTimedOutDone: the send timeout's timer gives an unanswered async publish its
// done; Close, coming while that done runs, returns only after it.
func TestRMQNativeCloseWaitsForTimedOutDone(t *testing.T) {
	f := newFakeRMQBroker(t, func(rmqTestRequest) []byte { return nil }) // never answers
	p := newTestRMQNative(t, f, 50*time.Millisecond, "t")
	started := make(chan struct{})
	var calls, finished atomic.Int32
	err := p.PublishAsync(0, "t", []byte("m"), func(err error) {
		if calls.Add(1) == 1 {
			if !errors.Is(err, publishers.ErrTimeout) {
				t.Errorf("done(%v), want the send timeout", err)
			}
			close(started)
		}
		// slower than the connection's wait for answers at Close (rmqNativeCloseWait)
		time.Sleep(rmqNativeCloseWait + 500*time.Millisecond)
		finished.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	_ = p.Close()
	if finished.Load() != 1 {
		t.Error("Close returned while the timer's done was still running")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("done called %d times, want once", n)
	}
}

// TestRMQNativeAsyncFullWindowHandsOver: with rmqMaxInFlight requests outstanding on a broker slow to
// answer, further async publishes return at once (they wait for a slot on the publisher's goroutines,
// not the caller's) and are sent, once each, when answers free the window.
func TestRMQNativeAsyncFullWindowHandsOver(t *testing.T) {
	var holding atomic.Bool
	release := make(chan struct{})
	f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte {
		if holding.Load() && q.code != rmqCodeHeartBeat {
			<-release // the fake reads nothing more meanwhile: the requests wait in the socket
		}
		return rmqTestResponse(0, q.opaque, "", false)
	})
	p := newTestRMQNative(t, f, 10*time.Second, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Publish(ctx, 0, "t", []byte("warm")); err != nil { // connected, route known
		t.Fatal(err)
	}
	holding.Store(true)
	const n = rmqMaxInFlight + 8
	dones := make(chan error, 2*n)
	for i := range n {
		start := time.Now()
		err := p.PublishAsync(0, "t", []byte("m"), func(err error) { dones <- err })
		if took := time.Since(start); took > 100*time.Millisecond || err != nil {
			close(release)
			t.Fatalf("async publish %d: %v after %v, want it taken at once (%d outstanding at most)", i, err, took, rmqMaxInFlight)
		}
	}
	close(release)
	for i, err := range testwait.Receive(t, 10*time.Second, "the dones", dones, n) {
		if err != nil {
			t.Errorf("done %d: %v", i, err)
		}
	}
	if got := len(f.requests()); got != n+1 {
		t.Errorf("the broker got %d sends, want %d (the warm-up and each async publish once)", got, n+1)
	}
}
