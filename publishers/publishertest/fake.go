package publishertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/publishers"
)

// Misbehaviour is one way a fake broker (a small server in the test process) breaks its protocol. Every
// fake knows what it stored; against every misbehaviour a publisher must acknowledge nothing the fake
// did not store, and fail what it cannot vouch for as unavailable (or timed out), never as success.
type Misbehaviour string

// The misbehaviours RunFakes drives every publisher against. Guessed answers name what a broker would
// expect the next ids to be: the received id plus one, two, three (receipt ids and opaques).
const (
	// Honest stores every message and answers as the protocol says: the check of the fake itself.
	Honest Misbehaviour = "honest"
	// Garbage answers every command with a frame that answers nothing (a response other than OK,
	// a receipt id nobody sent, bytes that are no frame) and stores nothing.
	Garbage Misbehaviour = "garbage answers"
	// CloseAfterHandshake completes the handshake, then closes the connection.
	CloseAfterHandshake Misbehaviour = "close after the handshake"
	// AheadOfHandshake sends answers right after the handshake, before any command (answers with
	// nothing outstanding), then behaves.
	AheadOfHandshake Misbehaviour = "answers before any command"
	// Twice stores every message and answers every command twice.
	Twice Misbehaviour = "answers twice"
	// AnswerAhead stores and answers every command, then sends answers guessed for the next three.
	AnswerAhead Misbehaviour = "answers ahead"
	// Flood sends guessed answers every millisecond from the handshake on, stores nothing and answers
	// nothing it got.
	Flood Misbehaviour = "unsolicited answers every 1ms"
	// StrayThenDrop answers a command, then sends the answer guessed for the next one before getting it,
	// and drops that next command (stores it not, answers it not).
	StrayThenDrop Misbehaviour = "stray answer, then the command dropped"
)

// Misbehaviours lists every misbehaviour, Honest first.
func Misbehaviours() []Misbehaviour {
	return []Misbehaviour{Honest, Garbage, CloseAfterHandshake, AheadOfHandshake, Twice, AnswerAhead, Flood, StrayThenDrop}
}

// violates reports whether a publisher must see a protocol violation (one counted) against m.
func (m Misbehaviour) violates() bool {
	return m != Honest && m != CloseAfterHandshake
}

// Fake is a misbehaving broker in the test process.
type Fake interface {
	// Addrs are what the publisher connects to: the broker addresses, or a cluster's name
	// server.
	Addrs() []string
	// Stored returns how many times each body was stored.
	Stored() map[string]int
	// Close stops the fake and waits for its goroutines; it is idempotent.
	Close()
}

// FakeFeatures says what the fakes of a protocol can show.
type FakeFeatures struct {
	// Skip names misbehaviours a protocol cannot defend against, each with the reason.
	Skip map[Misbehaviour]string
	// OneAtATime names misbehaviours driven with one publish at a time only, each with the reason.
	OneAtATime map[Misbehaviour]string
	// NoBatch: PublishBatch is not supported.
	NoBatch bool
	// NoProtocolErrors, when set, is why the publisher counts no protocol errors (its client library
	// reads the answers).
	NoProtocolErrors string
	// IgnoreGoroutines are goroutines the leak check must not count (a client library's).
	IgnoreGoroutines []goleak.Option
	// Few: a fifth of the publishes, for a publisher whose every failure waits for its send timeout.
	Few bool
}

// FakeConstructor makes a publisher for the fake; the suite closes it.
type FakeConstructor func(t testing.TB, f Fake) publishers.Publisher

// Timings of the fake runs: deadlines short enough that a command a fake drops costs little.
const (
	fakeDeadline = 5 * time.Second  // of each sync publish (a fake that drops a command costs it)
	fakeSettle   = 10 * time.Second // for the fake to have read what it acknowledged (it may lag the ack)
)

// RunFakes drives publishers made by newPublisher against a fake made by newFake for each misbehaviour:
// sync, batch and async publishes, one at a time and concurrently. What was acknowledged must have been
// stored by the fake (as often as acknowledged, at least); every failure is ErrUnavailable or
// ErrTimeout; a publisher that counts protocol errors (ProtocolErrors(host) uint64) has counted one
// wherever the fake broke the protocol; against Honest everything succeeds.
func RunFakes(t *testing.T, f FakeFeatures, newFake func(t testing.TB, m Misbehaviour) Fake, newPublisher FakeConstructor) {
	for _, m := range Misbehaviours() {
		t.Run(string(m), func(t *testing.T) {
			if why := f.Skip[m]; why != "" {
				t.Skip(why)
			}
			_, oneAtATime := f.OneAtATime[m]
			runFake(t, f, m, oneAtATime, newFake, newPublisher)
		})
	}
}

func runFake(t *testing.T, f FakeFeatures, m Misbehaviour, oneAtATime bool, newFake func(t testing.TB, m Misbehaviour) Fake, newPublisher FakeConstructor) {
	ignore := goleak.IgnoreCurrent()
	fake := newFake(t, m)
	p := newPublisher(t, fake)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = closeWithin(p, 30*time.Second)
			fake.Close()
		}
	})
	n := func(k int) int { // publishes of a step
		if f.Few {
			return max(k/5, 1)
		}
		return k
	}
	topic := freshTopic("fake")
	seq := 0
	var (
		mu    sync.Mutex
		acked [][]byte
		errs  = map[string]int{} // unexpected errors by text
		fails int
	)
	outcome := func(what string, err error, bodies ...[]byte) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			acked = append(acked, bodies...)
		case errors.Is(err, publishers.ErrUnavailable), errors.Is(err, publishers.ErrTimeout):
			fails++
		default:
			errs[what+": "+err.Error()]++
		}
	}
	publish := func(n int) {
		for _, body := range bodies(topic, &seq, n) {
			ctx, cancel := context.WithTimeout(context.Background(), fakeDeadline)
			outcome("Publish", p.Publish(ctx, 0, topic, body), body)
			cancel()
		}
	}
	publish(n(10))
	if !f.NoBatch {
		for range n(3) {
			batch := bodies(topic, &seq, 3)
			ctx, cancel := context.WithTimeout(context.Background(), fakeDeadline)
			outcome("PublishBatch", p.PublishBatch(ctx, 0, topic, batch), batch...)
			cancel()
		}
	}
	var k tracker
	if oneAtATime {
		for _, body := range bodies(topic, &seq, n(10)) {
			if err := k.publish(p, 0, topic, body); err != nil {
				outcome("PublishAsync", err)
				continue
			}
			k.waitAll(t, opTimeout)
		}
	} else {
		for _, body := range bodies(topic, &seq, n(30)) {
			if err := k.publish(p, 0, topic, body); err != nil {
				outcome("PublishAsync", err)
			}
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range n(10) {
					body := fmt.Appendf(nil, "publishertest %s g%d-%d", topic, g, i)
					ctx, cancel := context.WithTimeout(context.Background(), fakeDeadline)
					outcome("concurrent Publish", p.Publish(ctx, 0, topic, body), body)
					cancel()
				}
			})
		}
		waitGroup(t, &wg, opTimeout+time.Minute, "concurrent publishes")
	}
	publish(n(5)) // and after all that, one at a time again
	k.waitAll(t, opTimeout)
	for _, c := range k.snapshot() {
		if c.accepted && c.calls > 0 {
			outcome("PublishAsync's done", c.err, c.body)
		}
	}
	k.verifyOnce(t)
	// An acknowledgement may precede the fake's reading of the command (the honest fakes answer after
	// it, but an in-order protocol cannot tell): give the fake time to read what it got before closing.
	want := count(acked)
	for end := time.Now().Add(fakeSettle); !covers(fake.Stored(), want) && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	var protoErrs uint64
	if pc, ok := p.(interface{ ProtocolErrors(host int) uint64 }); ok {
		protoErrs = pc.ProtocolErrors(0)
	}
	if err := closeWithin(p, 30*time.Second); err != nil {
		t.Errorf("Close: %v", err)
	}
	fake.Close()
	closed = true
	goleak.VerifyNone(t, append([]goleak.Option{ignore}, f.IgnoreGoroutines...)...)
	for _, c := range k.snapshot() {
		if c.accepted && c.calls == 0 {
			t.Errorf("PublishAsync of %q: done never ran", c.body)
		}
	}
	stored := fake.Stored()
	var false2xx []string
	for body, n := range want {
		if stored[body] < n {
			false2xx = append(false2xx, fmt.Sprintf("%q acknowledged %d times, stored %d", body, n, stored[body]))
		}
	}
	sort.Strings(false2xx)
	report(t, fmt.Sprintf("acknowledged, not stored by the fake (%s)", m), false2xx)
	for text, n := range errs {
		t.Errorf("%d× %s: want nil, ErrUnavailable or ErrTimeout", n, text)
	}
	t.Logf("%s: %d acknowledged, %d failed as unavailable or timed out, %d bodies stored, %d protocol errors counted",
		m, len(acked), fails, len(stored), protoErrs)
	switch {
	case m == Honest && fails > 0:
		t.Errorf("against an honest fake %d publishes failed", fails)
	case m == Honest && protoErrs > 0:
		t.Errorf("against an honest fake %d protocol errors were counted", protoErrs)
	case m.violates() && protoErrs == 0 && hasProtocolErrors(p) && f.NoProtocolErrors == "":
		t.Errorf("the fake broke the protocol (%s) and no protocol error was counted", m)
	}
}

func hasProtocolErrors(p publishers.Publisher) bool {
	_, ok := p.(interface{ ProtocolErrors(host int) uint64 })
	return ok
}

func count(bodies [][]byte) map[string]int {
	m := map[string]int{}
	for _, b := range bodies {
		m[string(b)]++
	}
	return m
}

func covers(stored, want map[string]int) bool {
	for body, n := range want {
		if stored[body] < n {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------- the fakes' server

// Answerer decides, per connection, what a fake misbehaving as m writes back to a command it got.
type Answerer struct {
	M        Misbehaviour
	dropNext bool // StrayThenDrop: the command after a stray answer is dropped
}

// answer returns the bytes to write for a command (nil: none): ok is its answer, guess(k) the answer a
// broker would expect for the k-th command after it, garbage no answer at all; store stores the
// command's messages and is called when the fake keeps them.
func (a *Answerer) Answer(store func(), ok []byte, guess func(k int) []byte, garbage []byte) []byte {
	var out []byte
	switch a.M {
	case Garbage:
		return garbage
	case Flood:
		return nil
	case StrayThenDrop:
		if a.dropNext {
			a.dropNext = false
			return nil
		}
		a.dropNext = true
		out = append(append(out, ok...), guess(1)...)
	case Twice:
		out = append(append(out, ok...), ok...)
	case AnswerAhead:
		out = append(out, ok...)
		for k := 1; k <= 3; k++ {
			out = append(out, guess(k)...)
		}
	default:
		out = ok
	}
	store()
	return out
}

// FakeOne is a Fake of one server misbehaving as M.
type FakeOne struct {
	M Misbehaviour
	S *FakeServer
}

func (f *FakeOne) Addrs() []string        { return []string{f.S.Addr()} }
func (f *FakeOne) Stored() map[string]int { return f.S.StoredCopy() }
func (f *FakeOne) Close()                 { f.S.Close() }

// FakeServer accepts connections and runs handle on each; it records what was stored.
type FakeServer struct {
	ln     net.Listener
	handle func(c *FakeConn)
	wg     sync.WaitGroup
	once   sync.Once

	mu     sync.Mutex
	conns  map[*FakeConn]struct{}
	stored map[string]int
}

// FakeConn is one accepted connection: writes are serialised (a flood writes beside the handler).
type FakeConn struct {
	net.Conn
	s    *FakeServer
	wmu  sync.Mutex
	done chan struct{} // closed when the handler returned
}

func StartFakeServer(t testing.TB, handle func(c *FakeConn)) *FakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &FakeServer{ln: ln, handle: handle, conns: map[*FakeConn]struct{}{}, stored: map[string]int{}}
	s.wg.Go(s.accept)
	t.Cleanup(s.Close)
	return s
}

func (s *FakeServer) Addr() string { return s.ln.Addr().String() }

func (s *FakeServer) accept() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := &FakeConn{Conn: nc, s: s, done: make(chan struct{})}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				close(c.done)
				_ = nc.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			s.handle(c)
		})
	}
}

func (s *FakeServer) Store(bodies ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bodies {
		s.stored[string(b)]++
	}
}

func (s *FakeServer) StoredCopy() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.stored))
	for k, v := range s.stored {
		out[k] = v
	}
	return out
}

func (s *FakeServer) Close() {
	s.once.Do(func() {
		_ = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

func (c *FakeConn) Send(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Conn.Write(b)
	return err
}

// flood writes frame(i) for i = 1, 2, ... every millisecond until the connection ends.
func (c *FakeConn) Flood(frame func(i int) []byte) {
	c.s.wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for i := 1; ; i++ {
			select {
			case <-c.done:
				return
			case <-t.C:
			}
			if c.Send(frame(i)) != nil {
				return
			}
		}
	})
}
