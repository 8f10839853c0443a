package publishers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
)

// blockingLink is a connection whose Close blocks until released.
type blockingLink struct {
	started, release chan struct{}
	closed           atomic.Bool
}

func (l *blockingLink) Dead() bool { return false }
func (l *blockingLink) Close() {
	close(l.started)
	<-l.release
	l.closed.Store(true)
}

// A second Close racing the first returns only once the first has closed every connection: callers
// (the suite, an app shutting down) rely on everything being closed when their Close returns.
func TestPoolConcurrentClose(t *testing.T) {
	l := &blockingLink{started: make(chan struct{}), release: make(chan struct{})}
	p := NewPool("test", []string{"a:1"}, 1, func(context.Context, string) (*blockingLink, error) { return l, nil })
	if _, err := p.Get(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() { p.Close(); close(first) }()
	<-l.started
	second := make(chan bool, 1)
	go func() { p.Close(); second <- l.closed.Load() }()
	select {
	case closed := <-second:
		if !closed {
			t.Fatal("second Close returned while the first was still closing the connection")
		}
	case <-time.After(100 * time.Millisecond): // still waiting, as it should: let the first finish
	}
	close(l.release)
	if !<-second {
		t.Error("second Close returned before the connection was closed")
	}
	<-first
	if _, err := p.Get(context.Background(), 0); err != ErrClosed {
		t.Errorf("get after close: %v, want ErrClosed", err)
	}
}

// fakeLink is a connection that is live until killed.
type fakeLink struct{ dead atomic.Bool }

func (l *fakeLink) Dead() bool { return l.dead.Load() }
func (l *fakeLink) Close()     {}

// A slot that cannot connect (its dial fails, then the host's backoff runs) hands the request to a
// live sibling of the same host; only when no sibling is live does the request fail, with the dial's
// error.
func TestPoolFallsBackToLiveSibling(t *testing.T) {
	good := &fakeLink{}
	refused := errors.New("no CONNECTED in time")
	var dials atomic.Int32
	p := NewPool("test", []string{"a:1"}, 2, func(context.Context, string) (*fakeLink, error) {
		if dials.Add(1) == 1 {
			return good, nil
		}
		return nil, Wrap(ErrUnavailable, refused)
	})
	p.Backoff = DefaultBackoff()
	ctx := context.Background()
	for i := range 4 { // slots 1, 0, 1, 0: the second dials and fails, the fourth meets the backoff
		c, err := p.Get(ctx, 0)
		if err != nil || c != good {
			t.Fatalf("get %d: %v, %v; want the live connection", i, c, err)
		}
	}
	settle(p) // the second slot's dial runs on while its sibling serves
	if n := dials.Load(); n != 2 {
		t.Errorf("%d dials, want 2 (one per slot; the backoff holds the second slot's next)", n)
	}
	good.dead.Store(true)
	for i := range 2 {
		if c, err := p.Get(ctx, 0); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("get %d with no live connection: %v, %v; want ErrUnavailable", i, c, err)
		}
	}
	p.Close()
	if _, err := p.Get(ctx, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("get after close: %v, want ErrClosed", err)
	}
}

// A caller's publish ends under its own deadline even while another caller's dial to the same slot is
// slow (a black-holed host, a cold broker's TLS handshake): it does not queue behind that dial. And the
// dial is the pool's, bounded by the broker's dial timeout, not by the caller who started it: a
// handshake slower than every caller's deadline still connects the host for the callers after it.
func TestPoolSlowDialOutlivesItsCaller(t *testing.T) {
	const handshake = 300 * time.Millisecond
	newPool := func(dials *atomic.Int32) *Pool[*fakeLink] {
		p := NewPool("test", []string{"a:1"}, 1, func(ctx context.Context, _ string) (*fakeLink, error) {
			dials.Add(1)
			select {
			case <-time.After(handshake):
				return &fakeLink{}, nil
			case <-ctx.Done():
				return nil, Wrap(ErrUnavailable, ctx.Err())
			}
		})
		t.Cleanup(p.Close)
		return p
	}
	short := func(p *Pool[*fakeLink]) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := p.Get(ctx, 0)
		return time.Since(start), err
	}

	t.Run("a short caller behind a long caller's dial", func(t *testing.T) {
		var dials atomic.Int32
		p := newPool(&dials)
		long, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first := make(chan error, 1)
		go func() { _, err := p.Get(long, 0); first <- err }()
		for dials.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		if took, err := short(p); !errors.Is(err, ErrTimeout) || took > 200*time.Millisecond {
			t.Errorf("a 50 ms caller: %v after %v, want a timeout at its own deadline", err, took)
		}
		if err := <-first; err != nil {
			t.Errorf("the caller that waits long enough: %v", err)
		}
	})
	t.Run("every caller shorter than the handshake", func(t *testing.T) {
		var dials atomic.Int32
		p := newPool(&dials)
		deadline := time.Now().Add(5 * time.Second)
		for {
			took, err := short(p)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrTimeout) || took > 200*time.Millisecond {
				t.Fatalf("a 50 ms caller while the host dials: %v after %v, want a timeout at its own deadline", err, took)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no 50 ms caller got a connection within 5 s: a %v handshake never finishes for them (%d dials)", handshake, dials.Load())
			}
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("%d dials, want 1: a caller that leaves neither abandons the dial nor starts another", n)
		}
	})
}

// While a slot dials, its requests go to a live sibling at once instead of waiting for the dial.
func TestPoolSiblingServesWhileSlotDials(t *testing.T) {
	first := &fakeLink{}
	release := make(chan struct{})
	var dials atomic.Int32
	p := NewPool("test", []string{"a:1"}, 2, func(ctx context.Context, _ string) (*fakeLink, error) {
		if dials.Add(1) == 1 {
			return first, nil
		}
		select { // the second slot's dial hangs until released
		case <-release:
			return &fakeLink{}, nil
		case <-ctx.Done():
			return nil, Wrap(ErrUnavailable, ctx.Err())
		}
	})
	defer p.Close()
	ctx := context.Background()
	if c, err := p.Get(ctx, 0); err != nil || c != first {
		t.Fatalf("first get: %v, %v", c, err)
	}
	for i := range 4 { // half of them are the dialling slot's turn
		start := time.Now()
		c, err := func() (*fakeLink, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return p.Get(ctx, 0)
		}()
		if err != nil || c != first || time.Since(start) > time.Second {
			t.Fatalf("get %d while the other slot dials: %v, %v after %v; want the live sibling at once", i, c, err, time.Since(start))
		}
	}
	close(release)
	settle(p)
	if n := dials.Load(); n != 2 {
		t.Errorf("%d dials, want 2: one per slot, the hanging one not started again", n)
	}
	seen := map[*fakeLink]bool{}
	for range 2 {
		c, _ := p.Get(ctx, 0)
		seen[c] = true
	}
	if len(seen) != 2 {
		t.Errorf("after the dial: requests use %d connections, want both slots'", len(seen))
	}
}

// settle waits for the dials in progress to end (and to have recorded their outcome).
func settle[L Link](p *Pool[L]) {
	for _, slots := range p.slots {
		for _, s := range slots {
			s.mu.Lock()
			d := s.dialing
			s.mu.Unlock()
			if d != nil {
				<-d
			}
		}
	}
}

// GetAsync never waits for a dial on its caller's goroutine: a request made while the connection is
// being dialed is queued, then served by the dial's end (the connection, or the dial's failure, or
// ErrClosed at Close), each exactly once; at most MaxAsyncWaiting per host wait.
func TestPoolGetAsyncWaitsOnThePoolsGoroutine(t *testing.T) {
	type outcome struct {
		used   atomic.Int32
		failed chan error
	}
	newPool := func(result func(ctx context.Context) (*fakeLink, error)) (*Pool[*fakeLink], chan struct{}) {
		release := make(chan struct{})
		p := NewPool("test", []string{"a:1"}, 1, func(ctx context.Context, _ string) (*fakeLink, error) {
			select {
			case <-release:
				return result(ctx)
			case <-ctx.Done():
				return nil, Wrap(ErrUnavailable, ctx.Err())
			}
		})
		t.Cleanup(p.Close)
		return p, release
	}
	start := func(t *testing.T, p *Pool[*fakeLink], n int) []*outcome {
		t.Helper()
		out := make([]*outcome, n)
		for i := range out {
			o := &outcome{failed: make(chan error, 2)}
			out[i] = o
			began := time.Now()
			err := p.GetAsync(0, func(*fakeLink) error { o.used.Add(1); return nil }, func(err error) { o.failed <- err })
			if err != nil {
				t.Fatalf("GetAsync %d while the host dials: %v, want it queued", i, err)
			}
			if took := time.Since(began); took > 100*time.Millisecond {
				t.Fatalf("GetAsync %d took %v: it waited for the dial", i, took)
			}
		}
		return out
	}
	t.Run("served when the dial ends", func(t *testing.T) {
		link := &fakeLink{}
		p, release := newPool(func(context.Context) (*fakeLink, error) { return link, nil })
		if _, ok := p.Ready(0); ok {
			t.Error("Ready before any dial: a connection")
		}
		out := start(t, p, 3)
		close(release)
		served(t, p)
		for i, o := range out {
			if o.used.Load() != 1 || len(o.failed) != 0 {
				t.Errorf("request %d: used %d times, %d failures; want used once", i, o.used.Load(), len(o.failed))
			}
		}
		if l, ok := p.Ready(0); !ok || l != link {
			t.Errorf("Ready with a live connection: %v, %v; want it", l, ok)
		}
		var used *fakeLink
		if err := p.GetAsync(0, func(l *fakeLink) error { used = l; return nil }, func(error) {}); err != nil || used != link {
			t.Errorf("GetAsync with a live connection: %v, %v; want the connection at once", used, err)
		}
		link.dead.Store(true)
		if _, ok := p.Ready(0); ok {
			t.Error("Ready with the connection dead: a connection")
		}
		link.dead.Store(false)
		refused := errors.New("queue full")
		if err := p.GetAsync(0, func(*fakeLink) error { return refused }, func(error) { t.Error("fail called for a refusal returned") }); err != refused {
			t.Errorf("use's error on the caller's goroutine: %v, want it returned", err)
		}
	})
	t.Run("the dial's failure goes to fail", func(t *testing.T) {
		down := Wrap(ErrUnavailable, errors.New("connection refused"))
		p, release := newPool(func(context.Context) (*fakeLink, error) { return nil, down })
		out := start(t, p, 3)
		close(release)
		served(t, p)
		for i, o := range out {
			if o.used.Load() != 0 || len(o.failed) != 1 {
				t.Fatalf("request %d: used %d times, %d failures; want one failure", i, o.used.Load(), len(o.failed))
			}
			if err := <-o.failed; !errors.Is(err, ErrUnavailable) {
				t.Errorf("request %d: %v, want the dial's failure", i, err)
			}
		}
		// The host's backoff runs now: known at once, returned to the caller.
		if err := p.GetAsync(0, func(*fakeLink) error { return nil }, func(error) { t.Error("fail called for a failure returned") }); !errors.Is(err, ErrUnavailable) {
			t.Errorf("GetAsync during the backoff: %v, want ErrUnavailable returned", err)
		}
	})
	t.Run("Close fails the waiting", func(t *testing.T) {
		p, _ := newPool(func(context.Context) (*fakeLink, error) { return &fakeLink{}, nil })
		out := start(t, p, 3)
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return within 5 s while requests waited for a dial")
		}
		for i, o := range out {
			if o.used.Load() != 0 || len(o.failed) != 1 {
				t.Fatalf("request %d: used %d times, %d failures; want one failure", i, o.used.Load(), len(o.failed))
			}
			if err := <-o.failed; !errors.Is(err, ErrClosed) {
				t.Errorf("request %d: %v, want ErrClosed", i, err)
			}
		}
	})
	t.Run("bounded", func(t *testing.T) {
		p, release := newPool(func(context.Context) (*fakeLink, error) { return &fakeLink{}, nil })
		var used atomic.Int32
		for i := range MaxAsyncWaiting {
			if err := p.GetAsync(0, func(*fakeLink) error { used.Add(1); return nil }, func(error) {}); err != nil {
				t.Fatalf("GetAsync %d of %d: %v", i, MaxAsyncWaiting, err)
			}
		}
		err := p.GetAsync(0, func(*fakeLink) error { return nil }, func(error) { t.Error("fail called for a refusal returned") })
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("GetAsync past MaxAsyncWaiting: %v, want ErrUnavailable at once", err)
		}
		close(release)
		served(t, p)
		if n := used.Load(); n != MaxAsyncWaiting {
			t.Errorf("%d served, want %d", n, MaxAsyncWaiting)
		}
		if err := p.GetAsync(0, func(*fakeLink) error { return nil }, func(error) {}); err != nil {
			t.Errorf("GetAsync after the waiters were served: %v (the bound's count not given back)", err)
		}
	})
}

// served waits for the dials in progress to end and their waiting requests to be served.
func served(t *testing.T, p *Pool[*fakeLink]) {
	t.Helper()
	settle(p)
	testwait.Until(t, 5*time.Second, "the waiting requests served", func() error {
		if n := p.conns[0].waiting.Len(); n != 0 {
			return fmt.Errorf("%d still waiting", n)
		}
		return nil
	})
}
