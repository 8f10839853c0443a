package rocketmq_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// handOver bounds PublishAsync's return, as publishertest.RunSlowDial does: a hand-over, never a wait
// for the network (/sendAsync answers at once).
const handOver = 100 * time.Millisecond

// openSlow is a publisher of client (native or library) for f, with create_topics when create is set.
func openSlow(t *testing.T, f *fakeRocketMQ, client string, create bool, sendTimeout time.Duration) publishers.Publisher {
	t.Helper()
	f.broker = publishertest.StartFakeServer(t, f.serveBroker)
	f.ns = publishertest.StartFakeServer(t, f.serveNameServer)
	c := rocketmq.DefaultConfig()
	c.Client = client
	c.NameServers = f.Addrs()
	c.CreateTopics = create
	c.Producers = 1
	c.SendTimeout = sendTimeout
	p, err := rocketmq.New(c, nil, publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// asyncDones records each async publish's done calls.
type asyncDones struct {
	mu    sync.Mutex
	calls map[int][]error
	any   chan struct{} // one token per call
}

func newAsyncDones() *asyncDones {
	return &asyncDones{calls: map[int][]error{}, any: make(chan struct{}, 1024)}
}

func (d *asyncDones) done(i int) func(error) {
	return func(err error) {
		d.mu.Lock()
		d.calls[i] = append(d.calls[i], err)
		d.mu.Unlock()
		d.any <- struct{}{}
	}
}

func (d *asyncDones) of(i int) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]error(nil), d.calls[i]...)
}

// publishAsyncAtOnce makes n async publishes of distinct bodies to topic on host 0, failing t unless each
// returns nil within handOver.
func publishAsyncAtOnce(t *testing.T, p publishers.Publisher, topic string, n int, d *asyncDones) []string {
	t.Helper()
	var bodies []string
	for i := range n {
		body := fmt.Sprintf("%s-%d", topic, i)
		start := time.Now()
		err := p.PublishAsync(0, topic, []byte(body), d.done(i))
		if took := time.Since(start); took > handOver {
			t.Fatalf("async publish %d returned after %v: it waited on its caller's goroutine (/sendAsync answers at once)", i, took)
		}
		if err != nil {
			t.Fatalf("async publish %d: %v, want it taken while it waits", i, err)
		}
		bodies = append(bodies, body)
	}
	return bodies
}

// asyncWaits are what an async publish may have to wait for, made slow.
var asyncWaits = []struct {
	name   string
	create bool // create_topics
	slow   func(f *fakeRocketMQ, d time.Duration)
}{
	{"a route look-up", false, func(f *fakeRocketMQ, d time.Duration) { f.routeDelay = d }},
	{"a topic creation", true, func(f *fakeRocketMQ, d time.Duration) { f.createDelay = d }},
}

// TestAsyncHandsOver: on both send paths, async publishes to a topic whose route the name server is slow
// to give, or whose creation the broker is slow to answer, return at once, and each is stored once and
// acknowledged once that is done.
func TestAsyncHandsOver(t *testing.T) {
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		for _, w := range asyncWaits {
			t.Run(client+"/"+w.name, func(t *testing.T) {
				f := &fakeRocketMQ{}
				w.slow(f, 500*time.Millisecond)
				p := openSlow(t, f, client, w.create, 5*time.Second)
				d := newAsyncDones()
				const n = 3
				bodies := publishAsyncAtOnce(t, p, "slow", n, d)
				testwait.Receive(t, 10*time.Second, "the async publishes' dones", d.any, n)
				stored := f.Stored()
				for i, body := range bodies {
					if errs := d.of(i); len(errs) != 1 || errs[0] != nil {
						t.Errorf("async publish %d: done(%v), want done(nil) once", i, errs)
					}
					if stored[body] != 1 {
						t.Errorf("async publish %d stored %d times, want once", i, stored[body])
					}
				}
				if w.create && f.creates.Load() != 1 {
					t.Errorf("topic created %d times, want once", f.creates.Load())
				}
			})
		}
	}
}

// TestAsyncCloseWhileWaiting: Close ends async publishes waiting for a topic creation that never ends
// (both paths) or a route the name server never gives (native; rocketmq-client-go's look-up cannot be
// ended, and Close waits for it as for a sync publish's): it returns promptly, having given each
// done ErrClosed exactly once, and nothing was stored.
func TestAsyncCloseWhileWaiting(t *testing.T) {
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		for _, w := range asyncWaits {
			if client == rocketmq.ClientLibrary && !w.create {
				continue
			}
			t.Run(client+"/"+w.name, func(t *testing.T) {
				f := &fakeRocketMQ{}
				w.slow(f, -1) // never answered
				// send_timeout well above the bound on Close: the waits end by Close, not by their deadline
				p := openSlow(t, f, client, w.create, 20*time.Second)
				d := newAsyncDones()
				const n = 5
				publishAsyncAtOnce(t, p, "stuck", n, d)
				if w.create {
					testwait.For(t, 2*time.Second, "the topic creation to reach the broker", func() bool { return f.creates.Load() > 0 })
				} else {
					time.Sleep(100 * time.Millisecond) // the route fetch is under way
				}
				start := time.Now()
				if err := p.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				// The library's Close also waits for rocketmq-client-go's goroutines (a heart-beat task sleeps
				// 1 s before it notices, rmqGoroutineWait bounds it at 5 s); either bound is far below
				// send_timeout and the creation's 10 s.
				bound := time.Second
				if client == rocketmq.ClientLibrary {
					bound = 5 * time.Second
				}
				if took := time.Since(start); took > bound {
					t.Errorf("Close took %v with async publishes waiting: it waited for them to time out", took)
				}
				for i := range n { // given before Close returned: Close waits for its goroutines
					if errs := d.of(i); len(errs) != 1 || !errors.Is(errs[0], publishers.ErrClosed) {
						t.Errorf("async publish %d waiting at Close: done(%v), want done(ErrClosed) once", i, errs)
					}
				}
				time.Sleep(200 * time.Millisecond) // a second call would come now
				for i := range n {
					if errs := d.of(i); len(errs) != 1 {
						t.Errorf("async publish %d: done called %d times after Close, want once", i, len(errs))
					}
				}
				if s := f.Stored(); len(s) != 0 {
					t.Errorf("stored %v, want nothing: every publish was failed", s)
				}
				if err := p.PublishAsync(0, "stuck", []byte("late"), func(error) { t.Error("done of a refused PublishAsync ran") }); !errors.Is(err, publishers.ErrClosed) {
					t.Errorf("PublishAsync after Close: %v, want ErrClosed", err)
				}
			})
		}
	}
}

// TestAsyncWaitingBounded: with MaxAsyncWaiting publishes of a host waiting, the next that would wait is
// refused at once as unavailable, its done never called; one that need not wait still goes.
func TestAsyncWaitingBounded(t *testing.T) {
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		t.Run(client, func(t *testing.T) {
			f := &fakeRocketMQ{}
			p := openSlow(t, f, client, false, 5*time.Second)
			ready := newAsyncDones()
			publishAsyncAtOnce(t, p, "ready", 1, ready) // the route of "ready" is looked up and the connection made
			select {
			case <-ready.any:
			case <-time.After(10 * time.Second):
				t.Fatal("the first async publish not done within 10 s")
			}
			rocketmq.FillAsyncWaiting(p, 0)
			// A topic not looked up yet: the publish would wait for its route, which the name server
			// no longer gives (a quick answer could come before the publish looks, on a busy machine:
			// a CI run found the route ready and the publish sent).
			f.holdRoutes.Store(true)
			start := time.Now()
			err := p.PublishAsync(0, "fresh", []byte("over the bound"), func(error) { t.Error("done of a refused PublishAsync ran") })
			if took := time.Since(start); took > handOver || !errors.Is(err, publishers.ErrUnavailable) {
				t.Errorf("async publish over the bound: %v after %v, want ErrUnavailable at once", err, took)
			}
			d := newAsyncDones()
			publishAsyncAtOnce(t, p, "ready", 1, d) // the hot path waits for nothing: not bounded
			select {
			case <-d.any:
				if errs := d.of(0); errs[0] != nil {
					t.Errorf("async publish on the hot path: %v", errs[0])
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the async publish on the hot path not done within 10 s")
			}
		})
	}
}
