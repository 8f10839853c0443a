package publishers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Link is one broker connection managed by a pool. It owns its goroutines: Close says goodbye if the
// protocol has a way, fails what is pending with ErrClosed and waits for them.
type Link interface {
	Dead() bool
	Close()
}

// Pool holds a broker's connections: a fixed number of slots per host, used round-robin, each redialed
// when its connection breaks. It is what the connection-oriented publishers share.
type Pool[L Link] struct {
	name  string // broker, for errors
	Addrs []string
	slots [][]*slot[L] // [host][connection]
	next  []atomic.Uint32
	Dial  func(ctx context.Context, addr string) (L, error)
	conns []HostConns // [host]: connection counts, for ConnCounts
	// log gets one line per host and change of reachability as the slots see it when dialing, and a
	// line when connections die young; nil: none. The publisher's logger names the broker already and
	// is rate-limited (lograte).
	Log *slog.Logger
	// backoff is the redial policy of every host (DefaultBackoff; tests shorten it).
	Backoff Backoff

	closed    atomic.Bool
	closeOnce sync.Once
	// dials are the pool's, not their callers': a caller that leaves neither abandons a dial nor makes
	// the next caller start over. Beside the broker's own dial timeout, Close ends them.
	dials *Scope
}

// NewPool makes a pool of perHost connections to each of hosts, dialled by dial; name is the broker,
// for errors.
func NewPool[L Link](name string, hosts []string, perHost int, dial func(context.Context, string) (L, error)) *Pool[L] {
	p := &Pool[L]{
		name:    name,
		Addrs:   append([]string(nil), hosts...),
		slots:   make([][]*slot[L], len(hosts)),
		next:    make([]atomic.Uint32, len(hosts)),
		Dial:    dial,
		conns:   make([]HostConns, len(hosts)),
		Backoff: DefaultBackoff(),
	}
	p.dials = NewScope()
	for h, addr := range hosts {
		for range perHost {
			p.slots[h] = append(p.slots[h], &slot[L]{addr: addr, counts: &p.conns[h]})
		}
	}
	return p
}

// HostConns counts one host's connection set-ups, over all its slots, and holds the host's redial
// backoff: while it runs, every slot of the host fails fast with the last failure instead of queueing
// requests behind another dial.
type HostConns struct {
	opened, reopened, failed atomic.Uint64
	mu                       sync.Mutex
	down                     bool // the last dial of any of the host's slots failed
	redial                   Redial
	// events counts dial outcomes and connections found lost: news about the host, which a Ping
	// result learned before does not know (PingLimit).
	events atomic.Uint64
	// waiting counts the host's async publishes waiting for a dial (GetAsync), for their bound.
	waiting AsyncWaiting
}

// MayDial returns the error to fail with while the host's backoff runs; nil: a dial may start.
func (h *HostConns) MayDial() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.redial.Check(time.Now())
}

// Dialed records a slot's dial outcome (a failure starts or extends the backoff) and logs when it
// changes the host's reachability: an outage shows as one warning and one recovery line per host,
// however many requests fail in between.
func (h *HostConns) Dialed(log *slog.Logger, b Backoff, addr string, err error) {
	if err != nil {
		h.failed.Add(1)
	}
	h.events.Add(1)
	h.mu.Lock()
	if err != nil {
		h.redial.Failed(b, time.Now(), err)
	} // a success leaves the count alone: only a connection that proved itself resets it
	changed := h.down != (err != nil)
	h.down = err != nil
	h.mu.Unlock()
	if !changed || log == nil {
		return
	}
	if err != nil {
		log.Warn("broker host unreachable: cannot connect", "host", addr, "err", err)
	} else {
		log.Info("broker host reachable again: connected", "host", addr)
	}
}

// Lost records that a connection made lived ago was found dead. One that had not proved itself (see
// Backoff) holds the host's next dial back like a failed dial, failing requests with err meanwhile.
func (h *HostConns) Lost(log *slog.Logger, b Backoff, addr string, lived time.Duration, answered bool, err error) {
	h.events.Add(1)
	h.mu.Lock()
	wait := h.redial.Lost(b, time.Now(), lived, answered, err)
	h.mu.Unlock()
	if wait > 0 && log != nil {
		log.Warn("broker host connections lost soon after they were made: redialling with backoff",
			"host", addr, "lived", lived.Round(time.Millisecond), "next_dial_in", wait.Round(time.Millisecond))
	}
}

// Connected counts a connection made; replacing says it replaces an earlier one (a reconnect).
func (h *HostConns) Connected(replacing bool) {
	h.opened.Add(1)
	if replacing {
		h.reopened.Add(1)
	}
}

// Events is host's HostConns.Events, for PingLimit.
func (p *Pool[L]) Events(host int) uint64 { return p.conns[host].Events() }

// Events counts dial outcomes and connections found lost: news about the host (PingLimit).
func (h *HostConns) Events() uint64 { return h.events.Load() }

// Closed reports whether Close was called.
func (p *Pool[L]) Closed() bool { return p.closed.Load() }

// EachLive calls f with each slot's current connection, under the slot's lock (for tests' counts).
func (p *Pool[L]) EachLive(f func(L)) {
	for _, slots := range p.slots {
		for _, s := range slots {
			s.mu.Lock()
			if s.live {
				f(s.cur)
			}
			s.mu.Unlock()
		}
	}
}

// ConnCounts implements ConnCounter.
func (p *Pool[L]) ConnCounts(host int) ConnCounts {
	if p.CheckHost(host) != nil {
		return ConnCounts{}
	}
	return p.conns[host].Get()
}

// Get returns the host's counts.
func (h *HostConns) Get() ConnCounts {
	return ConnCounts{Opened: h.opened.Load(), Reopened: h.reopened.Load(), DialFailures: h.failed.Load()}
}

// CheckHost reports an out-of-range host index.
func (p *Pool[L]) CheckHost(host int) error {
	if host < 0 || host >= len(p.Addrs) {
		return fmt.Errorf("%s: host %d out of range (%d hosts)", p.name, host, len(p.Addrs))
	}
	return nil
}

// Get returns a live connection to host, the next slot in turn, dialing if needed; nothing once ctx
// ended, so no command is sent for a caller that left. While the slot dials, a live sibling of the
// same host takes the request; with none, the caller waits for the dial under its own ctx only: the
// dial is the pool's, and goes on for the callers after it.
func (p *Pool[L]) Get(ctx context.Context, host int) (L, error) {
	var zero L
	if err := p.CheckHost(host); err != nil {
		return zero, err
	}
	if ctx.Err() != nil {
		return zero, CtxErr(ctx)
	}
	slots := p.slots[host]
	i := int(p.next[host].Add(1)) % len(slots)
	s := slots[i]
	c, dialing, err := s.get(p)
	if dialing != nil {
		if len(slots) > 1 {
			// One slow or failed dial does not hold back requests another connection serves.
			if l, ok := p.live(host, i+1); ok {
				return l, nil
			}
		}
		select {
		case <-dialing:
			if ctx.Err() != nil { // the dial and the caller's deadline ended together
				return zero, CtxErr(ctx)
			}
			c, err = s.dialed(p)
		case <-ctx.Done():
			return zero, CtxErr(ctx)
		}
	}
	if ctx.Err() != nil {
		return c, err
	}
	return p.orSibling(host, i+1, c, err)
}

// orSibling is c and err, unless err says a slot has no connection and cannot make one now (its dial
// failed, or the host's backoff runs) and a sibling of host's, looked for from slot next on, holds a
// live one: a host that still serves a connection takes the request. Otherwise one slow CONNECT on a
// busy broker fails requests its other connection serves.
func (p *Pool[L]) orSibling(host, next int, c L, err error) (L, error) {
	if err == nil || len(p.slots[host]) == 1 || errors.Is(err, ErrClosed) {
		return c, err
	}
	if l, ok := p.live(host, next); ok {
		return l, nil
	}
	return c, err
}

// GetAsync is Get for a caller that must not wait for the network (PublishAsync): with a live
// connection, or a failure known now (the host's backoff, Close), it runs at once on the caller's
// goroutine: use's error or the failure is what it returns. While the connection is being dialed it
// queues use for the dial's end, where the dial's goroutine (the pool's) runs it with the connection,
// or calls fail with the dial's failure instead; a failure use returns then goes to fail too.
func (p *Pool[L]) GetAsync(host int, use func(L) error, fail func(error)) error {
	if err := p.CheckHost(host); err != nil {
		return err
	}
	slots := p.slots[host]
	i := int(p.next[host].Add(1)) % len(slots)
	s := slots[i]
	c, dialing, err := s.get(p)
	if dialing == nil {
		if c, err = p.orSibling(host, i+1, c, err); err != nil {
			return err
		}
		return use(c)
	}
	if len(slots) > 1 {
		if l, ok := p.live(host, i+1); ok {
			return use(l)
		}
	}
	w := asyncWaiter[L]{use: use, fail: fail, host: host, next: i + 1}
	queued, err := s.wait(p, w)
	if queued || err != nil {
		return err
	}
	// The dial ended between get and wait: its outcome is known now.
	if c, err = s.dialed(p); err != nil {
		return err
	}
	return use(c)
}

// Ready is the next slot's connection when it is live, without locking, dialing or waiting: the hot
// path of a caller that would otherwise build GetAsync's callbacks (an allocation per publish).
func (p *Pool[L]) Ready(host int) (L, bool) {
	if p.CheckHost(host) != nil {
		var zero L
		return zero, false
	}
	slots := p.slots[host]
	return slots[int(p.next[host].Add(1))%len(slots)].readyConn(p)
}

// asyncWaiter is a GetAsync call waiting for its slot's dial.
type asyncWaiter[L Link] struct {
	use        func(L) error
	fail       func(error)
	host, next int // for a sibling's live connection when the dial fails
}

// wait queues w for the dial in progress: false when there is none any more. A host's waiters are
// bounded (HostConns.waiting, over its slots): each holds a message.
func (s *slot[L]) wait(p *Pool[L], w asyncWaiter[L]) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dialing == nil {
		return false, nil
	}
	if !s.counts.waiting.Take() {
		return false, s.counts.waiting.Refusal(p.name+" "+s.addr, "a connection")
	}
	s.waiters = append(s.waiters, w)
	return true, nil
}

// serve runs the waiters of a dial that ended, on the dial's goroutine.
func (s *slot[L]) serve(p *Pool[L], waiters []asyncWaiter[L]) {
	if len(waiters) == 0 {
		return
	}
	c, err := s.dialed(p)
	for _, w := range waiters {
		use, werr := p.orSibling(w.host, w.next, c, err)
		if werr == nil {
			werr = w.use(use)
		}
		if werr != nil {
			w.fail(werr)
		}
		s.counts.waiting.Done()
	}
}

// Close closes every connection, dead ones included, so every connection goroutine has ended when it
// returns, for every caller: a concurrent second call waits for the first. It is idempotent.
func (p *Pool[L]) Close() {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		var wg sync.WaitGroup
		for _, slots := range p.slots {
			for _, s := range slots {
				s.mu.Lock() // after this the slot never dials again: get checks closed under mu
				if s.live {
					wg.Go(s.cur.Close) // in parallel: each may wait up to a second for its goodbye
				}
				s.mu.Unlock()
			}
		}
		p.dials.Close() // dials in progress stop; one that ends now closes what it made (dial checks closed)
		wg.Wait()
	})
}

// Live returns a live connection to host without dialing or waiting for a slot being dialed, or nil.
func (p *Pool[L]) Live(host int) L {
	var zero L
	if p.CheckHost(host) != nil || p.closed.Load() {
		return zero
	}
	c, _ := p.live(host, int(p.next[host].Add(1)))
	return c
}

// live returns the first live connection among host's slots from slot start on, skipping slots busy
// dialing.
func (p *Pool[L]) live(host, start int) (L, bool) {
	slots := p.slots[host]
	for i := range slots {
		s := slots[(start+i)%len(slots)]
		if !s.mu.TryLock() {
			continue
		}
		c, ok := s.cur, s.live && !s.cur.Dead()
		s.mu.Unlock()
		if ok {
			return c, true
		}
	}
	var zero L
	return zero, false
}

// slot holds one of a host's connections.
type slot[L Link] struct {
	addr   string
	counts *HostConns // the host's, shared by its slots
	// ready is cur while it is live, read without mu: every request takes a connection, so with one
	// connection per host a mutex here would be contended by every handler.
	ready atomic.Pointer[liveConn[L]]

	mu      sync.Mutex
	cur     L
	live    bool          // cur is set (it may have died since; it is closed when replaced)
	since   time.Time     // when cur was made
	opened  bool          // a connection was made before: the next one is a reconnect
	dialing chan struct{} // closed when the dial in progress ends; nil: none
	failed  error         // the last dial's failure, for the callers that waited for it
	waiters []asyncWaiter[L]
}

// readyConn is the slot's live connection, read without its lock; false when there is none (or the
// pool is closed).
func (s *slot[L]) readyConn(p *Pool[L]) (L, bool) {
	if r := s.ready.Load(); r != nil && !r.c.Dead() && !p.closed.Load() {
		return r.c, true
	}
	var zero L
	return zero, false
}

// liveConn boxes a slot's live connection for the lock-free path.
type liveConn[L Link] struct{ c L }

// get returns the slot's live connection, or the dial to wait for (starting one when there is none
// and the host's backoff allows), or why there is neither.
func (s *slot[L]) get(p *Pool[L]) (L, <-chan struct{}, error) {
	var zero L
	if c, ok := s.readyConn(p); ok {
		return c, nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.closed.Load() {
		return zero, nil, ErrClosed
	}
	if s.live && !s.cur.Dead() {
		return s.cur, nil, nil
	}
	if s.dialing != nil {
		return zero, s.dialing, nil
	}
	s.ready.Store(nil)
	if s.live {
		s.cur.Close() // dead already: this only waits for its goroutines, which are ending
		lived := time.Since(s.since)
		s.counts.Lost(p.Log, p.Backoff, s.addr, lived, LinkAnswered(s.cur), Wrap(ErrUnavailable,
			LostErr(fmt.Sprintf("%s %s", p.name, s.addr), lived, LinkCause(s.cur))))
	}
	s.cur, s.live = zero, false
	if err := s.counts.MayDial(); err != nil {
		return zero, nil, err
	}
	ctx, finished, err := p.dials.Enter(context.Background())
	if err != nil {
		return zero, nil, err
	}
	s.dialing = make(chan struct{})
	go s.dial(ctx, finished, p, s.dialing)
	return zero, s.dialing, nil
}

// dial makes the slot's connection within ctx (the pool's dial scope; the broker's dial timeout bounds
// it too), and records the outcome for the callers waiting on done and for the host's backoff.
func (s *slot[L]) dial(ctx context.Context, finished func(), p *Pool[L], done chan struct{}) {
	defer finished()
	c, err := p.Dial(ctx, s.addr)
	s.mu.Lock()
	waiters := s.waiters
	s.waiters = nil
	s.settle(p, c, err)
	close(done)
	s.mu.Unlock()
	s.serve(p, waiters) // before finished: Close waits for them
}

// settle records a dial's outcome; s.mu is held.
func (s *slot[L]) settle(p *Pool[L], c L, err error) {
	s.dialing = nil
	if p.closed.Load() {
		if err == nil {
			c.Close() // Close has passed this slot: nobody else will close it
		}
		s.failed = ErrClosed
		return
	}
	s.counts.Dialed(p.Log, p.Backoff, s.addr, err)
	if err != nil {
		s.failed = err
		return
	}
	s.cur, s.live, s.since, s.failed = c, true, time.Now(), nil
	s.counts.Connected(s.opened)
	s.opened = true
	s.ready.Store(&liveConn[L]{c})
}

// dialed is the outcome of the dial a caller waited for: the connection it made, or its failure.
func (s *slot[L]) dialed(p *Pool[L]) (L, error) {
	var zero L
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case p.closed.Load():
		return zero, ErrClosed
	case s.live && !s.cur.Dead():
		return s.cur, nil
	case s.failed != nil:
		return zero, s.failed
	case s.live: // it connected, and the connection died already
		return zero, Wrap(ErrUnavailable, LostErr(fmt.Sprintf("%s %s", p.name, s.addr), time.Since(s.since), LinkCause(s.cur)))
	default: // that connection died, and another caller found it so
		return zero, Wrap(ErrUnavailable, fmt.Errorf("%s %s: connection lost right after it was made", p.name, s.addr))
	}
}

// Await starts a request with a one-shot callback and waits for the callback or the end of ctx.
func Await(ctx context.Context, start func(done func(error)) error) error {
	w := waiters.Get().(*waiter)
	if err := start(w.done); err != nil {
		waiters.Put(w) // the callback is never called when start fails
		return err
	}
	select {
	case err := <-w.ch:
		waiters.Put(w)
		return err
	case <-ctx.Done():
		// Not put back: the callback may still run and must find the channel to itself.
		return CtxErr(ctx)
	}
}

// waiter is await's one-shot result channel and the callback feeding it, recycled so that a publish
// allocates neither (two allocations per request on the hot path otherwise).
type waiter struct {
	ch   chan error // buffered: a read loop never blocks on a caller that gave up
	done func(error)
}

var waiters = sync.Pool{New: func() any {
	w := &waiter{ch: make(chan error, 1)}
	w.done = func(err error) { w.ch <- err }
	return w
}}
