package mqtt

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// handOver bounds PublishAsync's return: a hand-over, never a wait for the network.
const handOver = 100 * time.Millisecond

// asyncWaitPublisher is a publisher of one host, addr, at version, with dialTimeout.
func asyncWaitPublisher(t *testing.T, addr, version string, dialTimeout time.Duration) *Publisher {
	t.Helper()
	c := DefaultConfig()
	c.Servers, c.Version, c.DialTimeout = []string{addr}, version, dialTimeout
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// asyncCalls are the outcomes of publishAsyncN's publishes: what each PublishAsync returned, and its
// done's calls.
type asyncCalls struct {
	calls []atomic.Int32
	errs  []atomic.Pointer[error] // the last done's error
	dones chan int                // the index of every done call
	ret   []error
}

// publishAsyncN publishes n bodies async to p's host 0, each PublishAsync to return within handOver.
func publishAsyncN(t *testing.T, p *Publisher, n int) *asyncCalls {
	t.Helper()
	a := &asyncCalls{calls: make([]atomic.Int32, n), errs: make([]atomic.Pointer[error], n), dones: make(chan int, 2*n), ret: make([]error, n)}
	for i := range n {
		start := time.Now()
		a.ret[i] = p.PublishAsync(0, "t", fmt.Appendf(nil, "async %d", i), func(err error) {
			a.errs[i].Store(&err)
			a.calls[i].Add(1)
			a.dones <- i
		})
		if took := time.Since(start); took > handOver {
			t.Fatalf("async publish %d returned after %v: it waited for the connection on its caller's goroutine", i, took)
		}
	}
	return a
}

// wait waits for want done calls, within d.
func (a *asyncCalls) wait(t *testing.T, want int, d time.Duration) {
	t.Helper()
	testwait.Receive(t, d, "the dones", a.dones, want)
}

// TestAsyncWaitsForDial: async publishes made while the host's connection is set up return at once and
// wait for it on goroutines of the publisher's: once connected they are published, once each; a dial
// that fails fails them through done; Close fails them with ErrClosed, once each, and returns at once;
// beyond maxWaiting they are refused at once. At MQTT 5 and 3.1.1.
func TestAsyncWaitsForDial(t *testing.T) {
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) {
			t.Run("published once connected", func(t *testing.T) { asyncPublishedOnceConnected(t, v) })
			t.Run("the dial times out", func(t *testing.T) { asyncDialTimesOut(t, v) })
			t.Run("closed while waiting", func(t *testing.T) { asyncClosedWhileWaiting(t, v) })
		})
	}
}

func asyncPublishedOnceConnected(t *testing.T, version string) {
	f := newFakeV(t, behave, version)
	addr, _ := publishertest.SlowFront(t, f.addr(), 300*time.Millisecond)
	p := asyncWaitPublisher(t, addr, version, 2*time.Second)
	const n = 5
	a := publishAsyncN(t, p, n)
	for i, err := range a.ret {
		if err != nil {
			t.Fatalf("async publish %d: %v, want it taken while the connection is set up", i, err)
		}
	}
	a.wait(t, n, 5*time.Second)
	for i := range n {
		if err := *a.errs[i].Load(); err != nil {
			t.Errorf("done %d: %v, want it published once connected", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if c := a.calls[i].Load(); c != 1 {
			t.Errorf("done %d ran %d times, want once", i, c)
		}
	}
	if s := f.stored.Load(); s != n {
		t.Errorf("the broker stored %d, want %d", s, n)
	}
	f.payloads.Range(func(k, v any) bool {
		if c := v.(*atomic.Int64).Load(); c != 1 {
			t.Errorf("the broker read %q %d times, want once", k, c)
		}
		return true
	})
}

func asyncDialTimesOut(t *testing.T, version string) {
	const dialTimeout = 300 * time.Millisecond
	f := newFakeV(t, silentConnect, version)
	p := asyncWaitPublisher(t, f.addr(), version, dialTimeout)
	const n = 3
	start := time.Now()
	a := publishAsyncN(t, p, n)
	for i, err := range a.ret {
		if err != nil {
			t.Fatalf("async publish %d: %v, want it taken while the connection is set up", i, err)
		}
	}
	a.wait(t, n, 2*dialTimeout+2*time.Second)
	if took := time.Since(start); took > 2*dialTimeout+time.Second {
		t.Errorf("the dones came %v after the publishes, mqtt.dial_timeout is %v", took, dialTimeout)
	}
	for i := range n {
		// The dial's own failure, which comes before the waiters' bound (twice the dial timeout).
		if err := *a.errs[i].Load(); !errors.Is(err, publishers.ErrUnavailable) {
			t.Errorf("done %d: %v, want ErrUnavailable", i, err)
		}
	}
	// The host is in its backoff now (recorded before the waiters learned the failure): refused at
	// once, done never called.
	if err := p.PublishAsync(0, "t", []byte("in backoff"), func(error) { t.Error("done called for a refused publish") }); !errors.Is(err, publishers.ErrUnavailable) {
		t.Errorf("async publish during the backoff: %v, want ErrUnavailable", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if c := a.calls[i].Load(); c != 1 {
			t.Errorf("done %d ran %d times, want once", i, c)
		}
	}
	if r := f.received.Load(); r != 0 {
		t.Errorf("the broker read %d PUBLISHes, want none (no connection was made)", r)
	}
}

func asyncClosedWhileWaiting(t *testing.T, version string) {
	f := newFakeV(t, silentConnect, version)
	p := asyncWaitPublisher(t, f.addr(), version, 10*time.Second)
	const waiting = 3
	p.hosts[0].waiting.SetLimit(waiting)
	a := publishAsyncN(t, p, waiting+1)
	for i, err := range a.ret[:waiting] {
		if err != nil {
			t.Fatalf("async publish %d: %v, want it taken while the connection is set up", i, err)
		}
	}
	if err := a.ret[waiting]; !errors.Is(err, publishers.ErrUnavailable) {
		t.Errorf("async publish %d, past maxWaiting %d: %v, want ErrUnavailable", waiting, waiting, err)
	}
	time.Sleep(50 * time.Millisecond) // the waiters wait for the dial, which the broker never answers
	if len(a.dones) != 0 {
		t.Fatalf("%d dones before Close, while the dial goes on", len(a.dones))
	}
	start := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v with publishes waiting for a dial", took)
	}
	// Close waited for the waiters: every done has run, once.
	for i := range waiting {
		if c := a.calls[i].Load(); c != 1 {
			t.Errorf("done %d ran %d times by Close's return, want once", i, c)
			continue
		}
		if err := *a.errs[i].Load(); !errors.Is(err, publishers.ErrClosed) {
			t.Errorf("done %d: %v, want ErrClosed", i, err)
		}
	}
	if c := a.calls[waiting].Load(); c != 0 {
		t.Errorf("done of the refused publish ran %d times, want never", c)
	}
	if n := p.hosts[0].waiting.Len(); n != 0 {
		t.Errorf("%d publishes still counted as waiting after Close", n)
	}
	if n := len(p.hosts[0].queue); n != 0 {
		t.Errorf("%d in-flight slots still held after Close", n)
	}
}
