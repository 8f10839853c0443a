// Package publishertest is the conformance suite every publishers.Publisher passes against a real broker,
// in the spirit of watermill's tests.TestPubSub: Run drives a publisher through the contract of
// publishers.Publisher and checks the outcome on the broker side.
//
// What it checks:
//   - delivery: what Publish, PublishBatch and PublishAsync acknowledge is exactly what the broker holds
//     (consumed and compared message by message: nothing missing, nothing extra, no duplicates);
//   - done of PublishAsync runs exactly once for every accepted publish, never for a refused one;
//   - an expired context deadline gives ErrTimeout and sends nothing;
//   - Close is idempotent and every method answers ErrClosed afterwards; once Close has returned, every
//     accepted publish's done has run: with nil or ErrClosed when publishes race Close, with ErrClosed
//     when they were pending on a stalled broker (and a blocked Publish has returned ErrClosed);
//   - a publish the broker refuses gives ErrRejected (or the kind the Rejection names), and the publisher goes on working;
//   - a login the broker refuses gives ErrUnavailable (503) from New or from every publish, never a
//     timeout or a message's refusal, and the broker holds nothing of those publishes;
//   - a stalled broker (SIGSTOP) ends sync publishes with ErrTimeout by their deadline and async ones with
//     ErrTimeout or ErrUnavailable within the publisher's documented bound, and the publisher recovers
//     once the broker runs again;
//   - no goroutine outlives Close (go.uber.org/goleak).
//
// Features lets a set-up opt out of what its broker cannot do, always with the reason.
package publishertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is the broker side of a set-up: how the suite counts what arrived.
type Broker interface {
	// Consume returns every message host's broker holds on topic, duplicates and strays included,
	// waiting until at least want have arrived or deadline has passed. The suite consumes each topic
	// once, after the publishes whose messages it counts have ended; want is how many were acknowledged,
	// so a Consume that returns as soon as it has want messages must make sure there are no more.
	Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte
}

// Freezer stalls a broker: FreezeHost makes host's broker accept bytes but answer nothing (SIGSTOP of its
// process), ThawHost lets it run again. A Broker that cannot do this gives Features.NoFreeze.
type Freezer interface {
	FreezeHost(t testing.TB, host int)
	ThawHost(t testing.TB, host int)
}

// Features says what a set-up can do. Each No* field, when non-empty, opts out of a group of checks and
// is the reason, printed with the skip.
type Features struct {
	// NoBatch: PublishBatch is not supported.
	NoBatch string
	// NoFreeze: the broker cannot be stalled (e.g. it runs inside the test process).
	NoFreeze string
	// NoReject: nothing a publisher can send makes the broker answer with an error.
	NoReject string
	// NoLogin: the broker takes every client (no login it could refuse).
	NoLogin string

	// Rejections are publishes the broker refuses (ValidateTopic is bypassed: Topic is used as given).
	// Required unless NoReject is set.
	Rejections []Rejection
	// BadLogin makes a publisher for the broker with a login it refuses (a wrong password), or returns
	// New's error. Required unless NoLogin is set.
	BadLogin func(t testing.TB) (publishers.Publisher, error)
	// AsyncTimeout is the publisher's documented bound for a PublishAsync to a broker that stopped
	// answering: by then done must have run. Required unless NoFreeze is set.
	AsyncTimeout time.Duration
	// IgnoreGoroutines are goroutines of the broker itself when it runs in the test process (an embedded
	// broker), which the leak check must not count.
	IgnoreGoroutines []goleak.Option
}

// Rejection is a publish the broker answers with an error.
type Rejection struct {
	Name  string // subtest name
	Topic string
	Body  []byte
	// Kind is the error kind the publish must fail with; nil means publishers.ErrRejected. A message
	// over a size limit the publisher knows is refused before it is sent: publishers.ErrTooLarge (413).
	Kind error
}

// Constructor makes a fresh publisher for the set-up's broker; the suite closes it. It fails t when it
// cannot.
type Constructor func(t testing.TB) publishers.Publisher

// Timings of the suite.
const (
	opTimeout      = 10 * time.Second // deadline of a publish expected to succeed
	consumeTimeout = 15 * time.Second // how long the broker side may take to hand over what it holds
	shortDeadline  = time.Second      // deadline of a publish to a stalled broker
	slack          = time.Second      // scheduling allowance on top of a bound
	recoverWithin  = 30 * time.Second // after a thaw, until publishing works again
)

// Run runs the conformance suite against the publishers newPublisher makes for broker b.
func Run(t *testing.T, f Features, b Broker, newPublisher Constructor) {
	s := &suite{f: f, b: b, newP: newPublisher}
	if f.NoFreeze == "" {
		fr, ok := b.(Freezer)
		if !ok {
			t.Fatal("publishertest: the Broker implements no Freezer and Features.NoFreeze gives no reason")
		}
		s.fr = fr
		if f.AsyncTimeout <= 0 {
			t.Fatal("publishertest: Features.AsyncTimeout is required for a broker that can be frozen")
		}
	}
	if f.NoReject == "" && len(f.Rejections) == 0 {
		t.Fatal("publishertest: Features.Rejections is empty and Features.NoReject gives no reason")
	}
	if f.NoLogin == "" && f.BadLogin == nil {
		t.Fatal("publishertest: Features.BadLogin is nil and Features.NoLogin gives no reason")
	}
	t.Run("delivery", s.delivery)
	t.Run("expired deadline", s.expiredDeadline)
	t.Run("close", func(t *testing.T) {
		t.Run("unused", s.closeUnused)
		t.Run("after use", s.closeAfterUse)
		t.Run("racing publishes", s.closeRacing)
		t.Run("pending at close", s.closePending)
	})
	t.Run("rejected", s.rejected)
	t.Run("refused login", s.refusedLogin)
	t.Run("stalled broker", s.stalled)
}

type suite struct {
	f    Features
	b    Broker
	fr   Freezer // nil with NoFreeze
	newP Constructor
}

// publisher makes the check's publisher with the set-up's Constructor (see open).
func (s *suite) publisher(t *testing.T) publishers.Publisher {
	t.Helper()
	p, _ := s.open(t, func(t testing.TB) (publishers.Publisher, error) { return s.newP(t), nil })
	return p
}

// open makes a publisher with newP. At cleanup it closes it, unless newP failed (a second Close when the
// check closed it already), and verifies that no goroutine started since just before newP ran is left.
func (s *suite) open(t *testing.T, newP func(testing.TB) (publishers.Publisher, error)) (publishers.Publisher, error) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	p, err := newP(t)
	t.Cleanup(func() {
		if err == nil {
			if err := closeWithin(p, 30*time.Second); err != nil {
				t.Errorf("Close at cleanup: %v", err)
			}
		}
		goleak.VerifyNone(t, append([]goleak.Option{ignore}, s.f.IgnoreGoroutines...)...)
	})
	return p, err
}

// closeWithin calls Close and fails when it does not return within d. The Close goroutine is then left
// running: the leak check reports it.
func closeWithin(p publishers.Publisher, d time.Duration) error {
	return closeWithinAt(p, d, nil)
}

// closeWithinAt is closeWithin, storing in called the time Close was called (the caller reads it
// once this returns): read on the goroutine that calls it, since starting one can take milliseconds
// on a busy machine, and a done decided meanwhile is no part of a race with Close.
func closeWithinAt(p publishers.Publisher, d time.Duration, called *atomic.Int64) error {
	done := make(chan error, 1)
	go func() {
		if called != nil {
			called.Store(time.Now().UnixNano())
		}
		done <- p.Close()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("Close did not return within %v", d)
	}
}

// freeze stalls host's broker until the check ends (or thaw runs earlier).
func (s *suite) freeze(t *testing.T, host int) (thaw func()) {
	t.Helper()
	var once sync.Once
	thaw = func() { once.Do(func() { s.fr.ThawHost(t, host) }) }
	// Registered before freezing, so a freeze that fails half-way is undone too, and after the
	// publisher's cleanup, so it runs before Close and the leak check.
	t.Cleanup(thaw)
	s.fr.FreezeHost(t, host)
	return thaw
}

func (s *suite) needFreeze(t *testing.T) {
	t.Helper()
	if s.f.NoFreeze != "" {
		t.Skip("broker cannot be stalled: " + s.f.NoFreeze)
	}
}

// freshTopic returns a fresh topic name, valid for every broker: prefix, '_', 12 hex digits.
func freshTopic(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// bodies makes n distinct message bodies for topic, numbered from *seq.
func bodies(topic string, seq *int, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		*seq++
		out[i] = fmt.Appendf(nil, "publishertest %s %d", topic, *seq)
	}
	return out
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ---------------------------------------------------------------- delivery

// delivery publishes to every host with each method and consumes back exactly what was acknowledged.
func (s *suite) delivery(t *testing.T) {
	p := s.publisher(t)
	for host := range p.Hosts() {
		topic := freshTopic("delivery")
		seq := 0
		var acked [][]byte
		for _, body := range bodies(topic, &seq, 5) {
			if err := p.Publish(ctxFor(t, opTimeout), host, topic, body); err != nil {
				t.Fatalf("host %d: Publish: %v", host, err)
			}
			acked = append(acked, body)
		}
		if s.f.NoBatch == "" {
			for range 2 {
				batch := bodies(topic, &seq, 3)
				if err := p.PublishBatch(ctxFor(t, opTimeout), host, topic, batch); err != nil {
					t.Fatalf("host %d: PublishBatch: %v", host, err)
				}
				acked = append(acked, batch...)
			}
		}
		var k tracker
		for _, body := range bodies(topic, &seq, 10) {
			if err := k.publish(p, host, topic, body); err != nil {
				t.Fatalf("host %d: PublishAsync: %v", host, err)
			}
		}
		k.waitAll(t, opTimeout)
		for _, c := range k.snapshot() {
			if c.calls == 0 {
				t.Fatalf("host %d: PublishAsync's done did not run within %v", host, opTimeout)
			}
			if c.err != nil {
				t.Fatalf("host %d: PublishAsync's done: %v", host, c.err)
			}
			acked = append(acked, c.body)
		}
		expectExactly(t, s.b, host, topic, acked)
		k.verifyOnce(t)
	}
}

// ---------------------------------------------------------------- deadlines

// expiredDeadline: a publish whose context deadline has already passed fails with ErrTimeout, the broker
// does not get it, and the publisher goes on working.
func (s *suite) expiredDeadline(t *testing.T) {
	p := s.publisher(t)
	topic := freshTopic("expired")
	seq := 0
	var acked [][]byte
	publishOK := func(what string) {
		body := bodies(topic, &seq, 1)[0]
		if err := p.Publish(ctxFor(t, opTimeout), 0, topic, body); err != nil {
			t.Fatalf("Publish %s: %v", what, err)
		}
		acked = append(acked, body)
	}
	publishOK("before") // a live connection: the expired deadline must be honoured on it, not only at dial
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	// Several times: publishers spread requests over their connections round-robin.
	for i := range 4 {
		if err := p.Publish(expired, 0, topic, bodies(topic, &seq, 1)[0]); !errors.Is(err, publishers.ErrTimeout) {
			t.Errorf("Publish #%d with an expired deadline: %v, want ErrTimeout", i+1, err)
		}
		if s.f.NoBatch == "" {
			if err := p.PublishBatch(expired, 0, topic, bodies(topic, &seq, 2)); !errors.Is(err, publishers.ErrTimeout) {
				t.Errorf("PublishBatch #%d with an expired deadline: %v, want ErrTimeout", i+1, err)
			}
		}
	}
	publishOK("after")
	expectExactly(t, s.b, 0, topic, acked)
}

// ---------------------------------------------------------------- Close

// closeUnused: Close on a publisher that never published is idempotent.
func (s *suite) closeUnused(t *testing.T) {
	p := s.publisher(t)
	for i := range 2 {
		if err := closeWithin(p, 10*time.Second); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	checkClosed(t, p, s.f.NoBatch == "")
}

// closeAfterUse: after Close every method answers ErrClosed (PublishAsync without calling done), and a
// second Close returns nil.
func (s *suite) closeAfterUse(t *testing.T) {
	p := s.publisher(t)
	topic := freshTopic("closed")
	if err := p.Publish(ctxFor(t, opTimeout), 0, topic, []byte("before close")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for i := range 2 {
		if err := closeWithin(p, 10*time.Second); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	checkClosed(t, p, s.f.NoBatch == "")
	expectExactly(t, s.b, 0, topic, [][]byte{[]byte("before close")})
}

func checkClosed(t *testing.T, p publishers.Publisher, batch bool) {
	t.Helper()
	topic := freshTopic("closed")
	if err := p.Publish(ctxFor(t, opTimeout), 0, topic, []byte("x")); !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("Publish after Close: %v, want ErrClosed", err)
	}
	if batch {
		if err := p.PublishBatch(ctxFor(t, opTimeout), 0, topic, [][]byte{[]byte("x"), []byte("y")}); !errors.Is(err, publishers.ErrClosed) {
			t.Errorf("PublishBatch after Close: %v, want ErrClosed", err)
		}
	}
	var k tracker
	if err := k.publish(p, 0, topic, []byte("x")); !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("PublishAsync after Close: %v, want ErrClosed", err)
	}
	k.verifyOnce(t)
}

// closeRacing: publishers keep publishing from several goroutines while Close runs (twice, concurrently).
// When Close returns, the done of every accepted publish has run, exactly once, with nil or ErrClosed;
// the broker holds every acknowledged message, possibly some that were failed (sent, then closed before
// the answer), nothing else and nothing twice.
func (s *suite) closeRacing(t *testing.T) {
	p := s.publisher(t)
	topic := freshTopic("race")
	var (
		k       tracker
		seq     atomic.Int64
		wg      sync.WaitGroup
		stop    atomic.Bool
		syncMu  sync.Mutex
		syncOK  [][]byte // sync publishes acknowledged
		syncAll [][]byte // sync publishes attempted
		errsMu  sync.Mutex
		errs    []error // unexpected errors of the publishing goroutines
	)
	// "a" marks async bodies, "s" sync ones, so a report names the method.
	body := func(kind string) []byte { return fmt.Appendf(nil, "publishertest %s %s%d", topic, kind, seq.Add(1)) }
	fail := func(err error) {
		errsMu.Lock()
		errs = append(errs, err)
		errsMu.Unlock()
	}
	// During the race a publish may also find its connection already shut: ErrUnavailable.
	racing := func(err error) bool {
		return errors.Is(err, publishers.ErrClosed) || errors.Is(err, publishers.ErrUnavailable)
	}
	// Before Close, a connection lost on a busy machine (a keep alive missed under the race detector)
	// is no part of the race: publishing goes on, through the publisher's redial.
	var closing atomic.Bool
	var lostBefore atomic.Int64
	beforeClose := func(err error) bool {
		if closing.Load() || !errors.Is(err, publishers.ErrUnavailable) {
			return false
		}
		lostBefore.Add(1)
		time.Sleep(10 * time.Millisecond)
		return true
	}
	// Bounded, so a broker slower to answer than the publishers are to write does not build a backlog.
	const perGoroutine = 250
	for range 4 {
		wg.Go(func() {
			for i := 0; i < perGoroutine && !stop.Load(); i++ {
				if err := k.publish(p, 0, topic, body("a")); err != nil {
					if beforeClose(err) {
						continue
					}
					if !racing(err) {
						fail(fmt.Errorf("PublishAsync during Close: %w", err))
					}
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; i < perGoroutine && !stop.Load(); i++ {
			b := body("s")
			syncMu.Lock()
			syncAll = append(syncAll, b)
			syncMu.Unlock()
			err := p.Publish(context.Background(), 0, topic, b) // no deadline: Close must end it
			if err != nil {
				if beforeClose(err) {
					continue
				}
				if !racing(err) {
					fail(fmt.Errorf("Publish during Close: %w", err))
				}
				return
			}
			syncMu.Lock()
			syncOK = append(syncOK, b)
			syncMu.Unlock()
		}
	})
	// Close once publishes are flowing (some acknowledged), so that some are in flight.
	k.waitAcked(t, 20, opTimeout)
	// Two concurrent calls: Close is idempotent. Which one does the work is not specified, so the
	// pending callbacks are checked once both have returned.
	closing.Store(true)
	var called1, called2 atomic.Int64
	second := make(chan error, 1)
	go func() { second <- closeWithinAt(p, 30*time.Second, &called2) }()
	err := closeWithinAt(p, 30*time.Second, &called1)
	err2 := <-second
	closeAt := time.Unix(0, min(called1.Load(), called2.Load())) // when the first Close call began
	snap := k.snapshot()
	stop.Store(true)
	if err != nil || err2 != nil {
		t.Fatalf("two concurrent Close calls: %v and %v", err, err2)
	}
	var unrun int
	for _, c := range snap {
		if c.accepted && c.calls == 0 {
			unrun++
		}
	}
	if unrun > 0 {
		t.Errorf("Close returned with the done of %d of %d accepted PublishAsync calls not run", unrun, countAccepted(snap))
	}
	waitGroup(t, &wg, opTimeout, "publishing goroutines to stop after Close")
	for _, err := range errs {
		t.Error(err)
	}
	k.waitAll(t, opTimeout) // callbacks Close left behind, if any, may still run: see how they end
	k.verifyOnce(t)
	var must, may [][]byte
	wrong := map[string]int{} // done errors other than ErrClosed, by text
	for _, c := range k.snapshot() {
		switch {
		case !c.accepted:
		case c.calls == 0: // reported above; its message may or may not be on the broker
			may = append(may, c.body)
		case c.err == nil:
			must = append(must, c.body)
		case errors.Is(c.err, publishers.ErrClosed):
			may = append(may, c.body)
		case errors.Is(c.err, publishers.ErrUnavailable) && c.at.Before(closeAt): // lost before the race
			lostBefore.Add(1)
			may = append(may, c.body)
		default:
			wrong[c.err.Error()]++
			may = append(may, c.body)
		}
	}
	for text, n := range wrong {
		t.Errorf("done of %d publishes racing Close: %s, want nil or ErrClosed", n, text)
	}
	syncMu.Lock()
	must = append(must, syncOK...)
	may = append(may, syncAll...) // superset of syncOK: fine, must is checked first
	syncMu.Unlock()
	t.Logf("%d acknowledged, %d failed or refused around Close", len(must), len(may))
	if n := lostBefore.Load(); n > 0 {
		t.Logf("%d publishes failed unavailable before Close began (a connection lost, then redialled)", n)
	}
	expectWithin(t, s.b, 0, topic, must, may)
}

// closePending: with the broker stalled, publishes are pending when Close runs. Close returns promptly,
// and by then every pending done has run with ErrClosed and the blocked sync Publish has returned ErrClosed.
func (s *suite) closePending(t *testing.T) {
	s.needFreeze(t)
	p := s.publisher(t)
	topic := freshTopic("pending")
	warm(t, p, topic)
	s.freeze(t, 0)
	var k tracker
	for i := range 10 {
		if err := k.publish(p, 0, topic, fmt.Appendf(nil, "pending %d", i)); err != nil {
			// A connection dialled now cannot be set up; that publish is refused, which is allowed.
			if !errors.Is(err, publishers.ErrUnavailable) && !errors.Is(err, publishers.ErrTimeout) {
				t.Errorf("PublishAsync to a stalled broker: %v, want nil, ErrUnavailable or ErrTimeout", err)
			}
		}
	}
	syncErr := make(chan error, 1)
	go func() {
		// The deadline is far: only Close can end this publish in time.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		syncErr <- p.Publish(ctx, 0, topic, []byte("pending sync"))
	}()
	snapBefore := k.snapshot()
	if countAccepted(snapBefore) == 0 {
		t.Fatal("no PublishAsync was accepted by the stalled broker's connections: nothing is pending for Close")
	}
	for _, c := range snapBefore {
		if c.calls > 0 {
			t.Errorf("done ran before Close with the broker stalled: %v", c.err)
		}
	}
	start := time.Now()
	if err := closeWithin(p, 10*time.Second); err != nil {
		t.Fatalf("Close with the broker stalled: %v", err)
	}
	took := time.Since(start)
	var unrun, notClosed []string
	for i, c := range k.snapshot() {
		switch {
		case !c.accepted:
		case c.calls == 0:
			unrun = append(unrun, fmt.Sprintf("#%d", i))
		case !errors.Is(c.err, publishers.ErrClosed):
			notClosed = append(notClosed, fmt.Sprintf("#%d: %v", i, c.err))
		}
	}
	report(t, fmt.Sprintf("pending PublishAsync calls: Close returned (after %v) and their done never ran", took.Round(time.Millisecond)), unrun)
	report(t, "pending PublishAsync calls: done ran at Close without ErrClosed", notClosed)
	select {
	case err := <-syncErr:
		if !errors.Is(err, publishers.ErrClosed) {
			t.Errorf("Publish pending at Close: %v, want ErrClosed", err)
		}
	case <-time.After(slack):
		t.Errorf("Publish pending at Close: still blocked %v after Close returned", slack)
		<-syncErr // its deadline ends it; the leak check would flag it otherwise
	}
	k.verifyOnce(t)
}

// warm publishes enough that every connection of host 0 is set up (pools use theirs round-robin), so a
// stall is met on live connections rather than at dial.
func warm(t *testing.T, p publishers.Publisher, topic string) {
	t.Helper()
	for i := range 8 {
		if err := p.Publish(ctxFor(t, opTimeout), 0, topic, fmt.Appendf(nil, "warm %d", i)); err != nil {
			t.Fatalf("Publish before the stall: %v", err)
		}
	}
}

// ---------------------------------------------------------------- rejections

// rejected: every publish the broker refuses fails with ErrRejected (or its Kind), sync and async, and afterwards the
// publisher delivers again (exactly what it acknowledges).
func (s *suite) rejected(t *testing.T) {
	if s.f.NoReject != "" {
		t.Skip("broker rejects nothing a publisher can send: " + s.f.NoReject)
	}
	for _, r := range s.f.Rejections {
		t.Run(r.Name, func(t *testing.T) {
			p := s.publisher(t)
			want := r.Kind
			if want == nil {
				want = publishers.ErrRejected
			}
			if err := p.Publish(ctxFor(t, opTimeout), 0, r.Topic, r.Body); !errors.Is(err, want) {
				t.Errorf("Publish: %v, want %v", err, want)
			}
			var k tracker
			if err := k.publish(p, 0, r.Topic, r.Body); err != nil {
				if !errors.Is(err, want) {
					t.Errorf("PublishAsync: %v, want nil (then done(%v)) or %v", err, want, want)
				}
			} else {
				k.waitAll(t, opTimeout)
				if c := k.snapshot()[0]; c.calls > 0 && !errors.Is(c.err, want) {
					t.Errorf("PublishAsync's done: %v, want %v", c.err, want)
				}
			}
			k.verifyOnce(t)
			// The broker may have closed the connection; the publisher replaces it.
			s.delivers(t, p, "after the rejection", 10*time.Second)
		})
	}
}

// refusedLogin: a login the broker refuses is a refused connection, ErrUnavailable (503) as with every
// broker: from New, or else from every publish (the first waits for the handshake, the next find the
// host failing), each by its deadline, never ErrTimeout or ErrRejected (a message's own refusal).
func (s *suite) refusedLogin(t *testing.T) {
	if s.f.NoLogin != "" {
		t.Skip("broker takes every client: " + s.f.NoLogin)
	}
	unavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, publishers.ErrUnavailable) || errors.Is(err, publishers.ErrRejected) {
			t.Errorf("%s with a refused login: %v, want ErrUnavailable", what, err)
		}
	}
	p, err := s.open(t, s.f.BadLogin)
	if err != nil { // refused at New: nothing to publish with
		unavailable("New", err)
		return
	}
	topic := freshTopic("login")
	seq := 0
	for i, body := range bodies(topic, &seq, 3) {
		unavailable(fmt.Sprintf("Publish #%d", i+1), p.Publish(ctxFor(t, opTimeout), 0, topic, body))
	}
	if s.f.NoBatch == "" {
		unavailable("PublishBatch", p.PublishBatch(ctxFor(t, opTimeout), 0, topic, bodies(topic, &seq, 2)))
	}
	var k tracker
	if err := k.publish(p, 0, topic, bodies(topic, &seq, 1)[0]); err != nil {
		unavailable("PublishAsync", err)
	} else {
		k.waitAll(t, opTimeout)
		if c := k.snapshot()[0]; c.calls > 0 {
			unavailable("PublishAsync's done", c.err)
		}
	}
	k.verifyOnce(t)
	expectExactly(t, s.b, 0, topic, nil)
}

// delivers checks that p works again within the given time (what names the moment, for errors): once
// publishing succeeds, a few publishes in a row succeed and the broker holds exactly them.
func (s *suite) delivers(t *testing.T, p publishers.Publisher, what string, within time.Duration) {
	t.Helper()
	waitPublishOK(t, p, freshTopic("probe"), within, 2*time.Second)
	topic := freshTopic("again")
	seq := 0
	want := bodies(topic, &seq, 5)
	for _, body := range want {
		if err := p.Publish(ctxFor(t, opTimeout), 0, topic, body); err != nil {
			t.Fatalf("Publish %s: %v", what, err)
		}
	}
	expectExactly(t, s.b, 0, topic, want)
}

// waitPublishOK publishes to topic on host 0 until 4 publishes in a row succeed (publishers spread
// requests over their connections: every one must work again), each try bounded by try, all by within.
func waitPublishOK(t *testing.T, p publishers.Publisher, topic string, within, try time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for i, ok := 0, 0; ok < 4; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), try)
		err := p.Publish(ctx, 0, topic, fmt.Appendf(nil, "probe %d", i))
		cancel()
		if err == nil {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(end) {
			t.Fatalf("publishing does not work again within %v: %v", within, err)
		}
		// Failed tries with a deadline pace themselves; quick failures (a redial backoff) need a pause.
		<-time.After(50 * time.Millisecond)
	}
}

// ---------------------------------------------------------------- stalled broker

// stalled: with host 0's broker stalled, sync publishes end by their deadline with ErrTimeout, async ones
// within AsyncTimeout with ErrTimeout or ErrUnavailable; after the thaw the publisher delivers again.
func (s *suite) stalled(t *testing.T) {
	s.needFreeze(t)
	p := s.publisher(t)
	topic := freshTopic("stall")
	warm(t, p, topic)
	thaw := s.freeze(t, 0)
	var k tracker
	start := time.Now()
	for i := range 3 {
		if err := k.publish(p, 0, topic, fmt.Appendf(nil, "stalled async %d", i)); err != nil && !stallErr(err) {
			t.Errorf("PublishAsync to a stalled broker: %v, want nil, ErrTimeout or ErrUnavailable", err)
		}
	}
	syncCheck := func(what string, publish func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), shortDeadline)
		defer cancel()
		begin := time.Now()
		err := publish(ctx)
		took := time.Since(begin)
		if !errors.Is(err, publishers.ErrTimeout) {
			t.Errorf("%s to a stalled broker: %v after %v, want ErrTimeout", what, err, took.Round(time.Millisecond))
		}
		if took > shortDeadline+slack {
			t.Errorf("%s to a stalled broker answered after %v, deadline %v", what, took.Round(time.Millisecond), shortDeadline)
		}
	}
	syncCheck("Publish", func(ctx context.Context) error { return p.Publish(ctx, 0, topic, []byte("stalled sync")) })
	if s.f.NoBatch == "" {
		syncCheck("PublishBatch", func(ctx context.Context) error {
			return p.PublishBatch(ctx, 0, topic, [][]byte{[]byte("stalled batch 1"), []byte("stalled batch 2")})
		})
	}
	bound := s.f.AsyncTimeout + slack
	k.waitAll(t, time.Until(start.Add(bound)))
	for i, c := range k.snapshot() {
		switch {
		case !c.accepted:
		case c.calls == 0:
			t.Errorf("PublishAsync #%d to a stalled broker: done has not run after %v (AsyncTimeout %v)", i, bound, s.f.AsyncTimeout)
		case !stallErr(c.err):
			t.Errorf("PublishAsync #%d to a stalled broker: done(%v) after %v, want ErrTimeout or ErrUnavailable", i, c.err, c.at.Sub(start).Round(time.Millisecond))
		default:
			t.Logf("PublishAsync #%d to a stalled broker: done after %v: %v", i, c.at.Sub(start).Round(time.Millisecond), c.err)
		}
	}
	thaw()
	s.delivers(t, p, "after the thaw", recoverWithin)
	// Close now runs whatever done is still pending (that one was reported above); verifyOnce then
	// checks none ran twice.
	if err := closeWithin(p, 10*time.Second); err != nil {
		t.Fatalf("Close: %v", err)
	}
	k.verifyOnce(t)
}

func stallErr(err error) bool {
	return errors.Is(err, publishers.ErrTimeout) || errors.Is(err, publishers.ErrUnavailable)
}

// ---------------------------------------------------------------- helpers

func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("waiting for %s: not within %v", what, d)
	}
}
