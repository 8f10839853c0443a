package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqtarget/mqtarget/internal/lograte"
	"github.com/mqtarget/mqtarget/publishers"
)

// Publisher publishes to independent MQTT brokers, one connection per configured server (see doc.go).
type Publisher struct {
	d     *dialer
	addrs []string
	hosts []*host
	qos   byte
	log   *slog.Logger

	mu     sync.RWMutex // guards closed against wg.Add
	closed bool
	root   context.Context // ends at Close: dials and async publishes
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the publisher: dials, watchers, publishes
	once   sync.Once
}

// host is one server's connection and counters.
type host struct {
	idx   int
	addr  string
	queue chan struct{} // publishes accepted and not yet answered (mqtt.max_inflight)
	ping  chan struct{} // one Ping at a time

	mu       sync.Mutex
	cur      *session      // nil: none (never made, or lost)
	dialing  chan struct{} // closed when the dial in progress ends; nil: none
	rd       redial
	hadConn  bool
	pingAt   time.Time
	pingErr  error
	pingNews uint64 // h.news() when pingErr was learned

	// waiting counts the async publishes waiting for a connection being made (awaitSession), for
	// their bound: each holds its message.
	waiting publishers.AsyncWaiting

	version                        atomic.Pointer[string]
	opened, reopened, dialFailures atomic.Uint64
	lost                           atomic.Uint64 // connections found ended
	protoErrs                      atomic.Uint64
}

// news counts what happened to h's connections (dials, failed dials, losses): a Ping result learned
// before any of it no longer answers for the host.
func (h *host) news() uint64 { return h.opened.Load() + h.dialFailures.Load() + h.lost.Load() }

// sysVersion is the $SYS topic mosquitto and mochi-mqtt publish (retained) their version on.
const sysVersion = "$SYS/broker/version"

// pingReuse is how long a Ping result answers for its host (unless its connections showed news since),
// so /readyz at any rate makes at most one connection per host and second.
const pingReuse = time.Second

// New creates the publisher. It does not connect: each server's connection is made on first use and
// again after it broke, under publishers.DefaultBackoff.
func New(c Config, log *slog.Logger) (*Publisher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = lograte.Logger(log, lograte.New(lograte.Interval)) // a failing broker must not flood the log
	d, err := newDialer(c, "pub", log)
	if err != nil {
		return nil, err
	}
	p := &Publisher{d: d, addrs: c.Servers, qos: byte(c.QoS), log: log}
	p.root, p.cancel = context.WithCancel(context.Background())
	for i, a := range c.Servers {
		p.hosts = append(p.hosts, &host{
			idx: i, addr: a,
			queue: make(chan struct{}, c.MaxInFlight),
			ping:  make(chan struct{}, 1),
			rd:    redial{b: publishers.DefaultBackoff()},
		})
	}
	return p, nil
}

// Hosts implements publishers.Publisher: the servers in configured order.
func (p *Publisher) Hosts() []string { return p.addrs }

// ValidateTopic implements publishers.Publisher.
func (p *Publisher) ValidateTopic(name string) error { return ValidateTopic(name) }

// goOwned runs f on a goroutine Close waits for; false after Close.
func (p *Publisher) goOwned(f func()) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

func (p *Publisher) isClosed() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.closed
}

func (p *Publisher) host(i int) (*host, error) {
	if i < 0 || i >= len(p.hosts) {
		return nil, fmt.Errorf("host %d out of range (0..%d)", i, len(p.hosts)-1)
	}
	return p.hosts[i], nil
}

// session returns h's live connection, dialling one (once, for every caller) when there is none and
// the host is not in its backoff.
func (p *Publisher) session(ctx context.Context, h *host) (*session, error) {
	for {
		s, ch, err := p.sessionOrDial(h)
		if s != nil || err != nil {
			return s, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, publishers.CtxErr(ctx)
		case <-p.root.Done():
			return nil, publishers.ErrClosed
		}
	}
}

// sessionOrDial returns h's live connection, or else the dial in progress to wait for (starting one
// when there is none and the host is not in its backoff), or why there is neither. It never waits.
func (p *Publisher) sessionOrDial(h *host) (*session, <-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.cur; s != nil && s.ctx.Err() == nil {
		return s, nil, nil
	}
	if err := h.rd.check(time.Now()); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", publishers.ErrUnavailable, err)
	}
	if h.dialing == nil {
		ch := make(chan struct{})
		h.dialing = ch
		if !p.goOwned(func() { p.dialHost(h, ch) }) {
			h.dialing = nil
			return nil, nil, publishers.ErrClosed
		}
	}
	return nil, h.dialing, nil
}

// dialHost makes h's connection, not under any caller's context: one caller giving up must not fail
// the dial the others wait for. The dial timeout bounds it.
func (p *Publisher) dialHost(h *host, ch chan struct{}) {
	tap := newAckTap(func(err error) {
		h.protoErrs.Add(1)
		p.log.Warn("mqtt broker broke the protocol: connection closed, what was pending on it failed as unavailable", "addr", h.addr, "err", err)
	})
	s, err := p.d.dial(p.root, h.addr, p.d.clientID(h.idx), tap, func(topic string, payload []byte) {
		if topic == sysVersion {
			v := strings.ToValidUTF8(string(payload[:min(len(payload), 128)]), "?")
			h.version.Store(&v)
		}
	}, func(err error) {
		p.log.Warn("mqtt connection lost; redialling", "addr", h.addr, "err", err)
	})
	h.mu.Lock()
	defer func() { h.dialing = nil; close(ch); h.mu.Unlock() }()
	if err != nil {
		h.dialFailures.Add(1)
		w := h.rd.failed(time.Now(), fmt.Errorf("mqtt %s: %w", h.addr, err))
		p.log.Warn("mqtt dial failed", "addr", h.addr, "err", err, "retry_in", w.Round(time.Millisecond))
		return
	}
	h.cur = s                                 // before its watcher runs, which clears it when s ends
	if !p.goOwned(func() { p.watch(h, s) }) { // closed meanwhile
		h.cur = nil
		s.close()
		s.cancel()
		return
	}
	h.opened.Add(1)
	if h.hadConn {
		h.reopened.Add(1)
	}
	h.hadConn = true
}

// watch learns the broker's version and notices when s ends: its publishes then fail as unavailable
// (paho forgets them without an answer) and the next publish redials.
func (p *Publisher) watch(h *host, s *session) {
	if h.version.Load() == nil {
		ctx, cancel := context.WithTimeout(p.root, p.d.cfg.DialTimeout)
		// paho.golang's Subscribe does not return when the connection ends: without this the loss of
		// a connection that ends before its SUBACK would be noticed only at dial_timeout.
		asked := make(chan struct{})
		p.goOwned(func() {
			select {
			case <-s.link.done():
				cancel()
			case <-asked:
			}
		})
		// Brokers without $SYS answer with a failure reason or nothing; the version stays unknown.
		_, _ = s.link.subscribe(ctx, sysVersion, 0)
		close(asked)
		cancel()
	}
	select {
	case <-s.link.done():
	case <-p.root.Done():
		if p.qos == 2 {
			s.drain(drainWait)
		}
		s.close()
	}
	s.cancel()
	h.mu.Lock()
	if h.cur == s {
		h.cur = nil
		h.lost.Add(1)
		h.rd.lost(time.Now(), time.Since(s.born), s.answered.Load(), fmt.Errorf("mqtt %s: connection lost %v after it was made; redialling with backoff", h.addr, time.Since(s.born).Round(time.Millisecond)))
	}
	h.mu.Unlock()
	s.link.release() // once the host may redial
}

// packetSize is the size of a QoS 1/2 PUBLISH of body to topic with no properties: fixed header (at
// most 5 bytes), topic, packet identifier, property length.
func packetSize(topic string, body []byte) int { return 5 + 2 + len(topic) + 2 + 1 + len(body) }

// start hands one PUBLISH to host's connection on an owned goroutine, first waiting under ctx for the
// connection and for room in the in-flight window; done runs once with the outcome.
func (p *Publisher) start(ctx context.Context, host int, topic string, body []byte, done func(error)) error {
	if p.isClosed() {
		return publishers.ErrClosed
	}
	if ctx.Err() != nil {
		return publishers.CtxErr(ctx)
	}
	h, err := p.host(host)
	if err != nil {
		return err
	}
	s, err := p.session(ctx, h)
	if err != nil {
		return err
	}
	if err := p.fits(s, topic, body); err != nil {
		return err
	}
	select {
	case h.queue <- struct{}{}:
	case <-ctx.Done():
		return publishers.CtxErr(ctx)
	case <-s.ctx.Done():
		return fmt.Errorf("%w: mqtt %s: connection lost", publishers.ErrUnavailable, h.addr)
	}
	return p.goSend(h, s, topic, body, done)
}

// fits refuses what s's broker announced it does not take (CONNACK), before it is sent.
func (p *Publisher) fits(s *session, topic string, body []byte) error {
	if s.maxSize > 0 && packetSize(topic, body) > int(s.maxSize) {
		return fmt.Errorf("%w: a PUBLISH of %d bytes exceeds the broker's Maximum Packet Size %d (CONNACK)", publishers.ErrTooLarge, packetSize(topic, body), s.maxSize)
	}
	if p.qos > s.maxQoS {
		return fmt.Errorf("%w: mqtt.qos %d exceeds the broker's Maximum QoS %d (CONNACK)", publishers.ErrRejected, p.qos, s.maxQoS)
	}
	return nil
}

// goSend sends body on s on an owned goroutine and runs done with the outcome. The caller holds a slot
// of h's in-flight window, which is freed before done runs.
func (p *Publisher) goSend(h *host, s *session, topic string, body []byte, done func(error)) error {
	if !p.goOwned(func() {
		err := p.sendOnce(h, s, topic, body)
		<-h.queue
		done(err)
	}) {
		<-h.queue
		return publishers.ErrClosed
	}
	return nil
}

// awaitSession is goSend for a publish whose connection is still being made: it waits for the
// connection on an owned goroutine, not its caller's (PublishAsync never waits for the network), at
// most twice mqtt.dial_timeout: the dial waited for started no later than the call and ends within one,
// and the second lets its outcome (which comes a moment after its own timeout) come before this wait's.
// A failure of that wait goes to done. The caller holds a slot of h's in-flight window; at most
// h.waiting's limit publishes wait per host, beyond which it is refused (and freed) at once.
func (p *Publisher) awaitSession(h *host, topic string, body []byte, done func(error)) error {
	if !h.waiting.Take() {
		<-h.queue
		return h.waiting.Refusal("mqtt "+h.addr, "the connection being made")
	}
	if !p.goOwned(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*p.d.cfg.DialTimeout)
		s, err := p.session(ctx, h)
		cancel()
		h.waiting.Done()
		switch {
		case err != nil && p.isClosed():
			err = publishers.ErrClosed // the dial failed because Close ended it
		case err == nil:
			if err = p.fits(s, topic, body); err == nil {
				err = p.sendOnce(h, s, topic, body)
			}
		}
		<-h.queue
		done(err)
	}) {
		h.waiting.Done()
		<-h.queue
		return publishers.ErrClosed
	}
	return nil
}

// send publishes body and waits for its acknowledgement (QoS 1: PUBACK, 2: PUBCOMP; 0: the write)
// up to maxAckWait, whatever the caller's deadline (the caller stops waiting at it), first waiting for
// room in the broker's Receive Maximum (at 3.1.1, which has none: qos2Window311 at QoS 2): the slot
// it holds is then freed exactly when paho's is, so paho's own send quota never holds a publish. A
// broker that acknowledges nothing within maxAckWait has stalled: the connection is closed, failing
// what is pending on it, and the host redials. Neither paho keeps anything of a publish for another
// connection (a session lives and dies with its client; session311.go), so one that timed out is
// never sent again.
func (p *Publisher) send(s *session, topic string, body []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx, maxAckWait)
	defer cancel()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		if p.isClosed() {
			return publishers.ErrClosed
		}
		if s.ctx.Err() != nil {
			return fmt.Errorf("%w: %w", publishers.ErrUnavailable, errNotWritten)
		}
		return fmt.Errorf("%w: the broker's Receive Maximum stayed full for %v; not sent", publishers.ErrTimeout, maxAckWait)
	}
	err := s.link.publish(ctx, p.qos, topic, body)
	if p.qos > 0 && (err == nil || errors.Is(err, errAnswered)) && !s.answered.Load() {
		s.answered.Store(true)
	}
	if err == nil {
		return nil
	}
	err = sendOutcome(err, p.isClosed(), s.ctx, ctx)
	if errors.Is(err, errStalled) {
		s.close()
	}
	return err
}

// sendOnce is send, and once more on the host's next connection when s had ended before the publish
// was written (a broker that closes the connection after refusing a publish ends it while the next
// ones are on their way to it): nothing of it reached the broker, so it cannot be stored twice. The
// wait for that connection is bounded by twice mqtt.dial_timeout, as awaitSession's.
func (p *Publisher) sendOnce(h *host, s *session, topic string, body []byte) error {
	err := p.send(s, topic, body)
	if !errors.Is(err, errNotWritten) || p.isClosed() {
		return err
	}
	ctx, cancel := context.WithTimeout(p.root, 2*p.d.cfg.DialTimeout)
	defer cancel()
	select {
	case <-s.ctx.Done(): // its watcher retired it: the host hands out another
	case <-ctx.Done():
		return err
	}
	next, nerr := p.session(ctx, h)
	switch {
	case nerr != nil && errors.Is(nerr, publishers.ErrUnavailable):
		return nerr // the host's own state now (its backoff, a failed dial)
	case nerr != nil:
		return err
	}
	if err := p.fits(next, topic, body); err != nil {
		return err
	}
	return p.send(next, topic, body)
}

// errStalled marks a publish that got no acknowledgement within maxAckWait on a live connection.
var errStalled = fmt.Errorf("no acknowledgement within %v; connection closed", maxAckWait)

// sendOutcome is what a publish's error means: session is its connection's context and ack the
// publish's (session's child, ending after maxAckWait). Only ack's own deadline means the broker
// stalled: ack also ends when the connection does, and a check of session made a moment before may
// have missed that (a protocol violation closes the connection as its publishes fail), so that is
// asked of ack's error, not inferred from session's.
func sendOutcome(err error, closed bool, session, ack context.Context) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, publishers.ErrRejected):
		return err
	case closed:
		return fmt.Errorf("%w: %w", publishers.ErrClosed, err)
	case errors.Is(err, errNotWritten):
		return fmt.Errorf("%w: %w", publishers.ErrUnavailable, err)
	case session.Err() != nil || errors.Is(ack.Err(), context.Canceled):
		return fmt.Errorf("%w: connection lost before the acknowledgement: %w", publishers.ErrUnavailable, err)
	case errors.Is(ack.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", publishers.ErrTimeout, errStalled)
	}
	return fmt.Errorf("%w: %w", publishers.ErrUnavailable, err)
}

// Publish implements publishers.Publisher: it returns once the broker acknowledged the PUBLISH as
// mqtt.qos says, or ctx ended.
func (p *Publisher) Publish(ctx context.Context, host int, topic string, body []byte) error {
	ch := make(chan error, 1)
	if err := p.start(ctx, host, topic, body, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return publishers.CtxErr(ctx)
	}
}

// PublishBatch implements publishers.Publisher. MQTT has no batch: every body is its own PUBLISH, all
// handed over at once, and the batch is acknowledged when every one is (the first failure otherwise;
// the others may still have been stored).
func (p *Publisher) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	ch := make(chan error, len(bodies))
	started := 0
	var first error
	for _, b := range bodies {
		if err := p.start(ctx, host, topic, b, func(err error) { ch <- err }); err != nil {
			first = err
			break
		}
		started++
	}
	for range started {
		select {
		case err := <-ch:
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return publishers.CtxErr(ctx)
		}
	}
	return first
}

// PublishAsync implements publishers.Publisher: done runs with the acknowledgement's outcome within
// maxAckWait (the async bound) of the PUBLISH being handed to the connection; a full in-flight window
// refuses the publish (ErrUnavailable), as does a host in its backoff. It never waits on its caller's
// goroutine: while the host's connection is being made the publish waits for it on one of the
// publisher's (awaitSession), so its done runs within twice mqtt.dial_timeout plus maxAckWait.
func (p *Publisher) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	if p.isClosed() {
		return publishers.ErrClosed
	}
	h, err := p.host(host)
	if err != nil {
		return err
	}
	s, _, err := p.sessionOrDial(h)
	if err != nil {
		return err
	}
	if s != nil {
		if err := p.fits(s, topic, body); err != nil {
			return err
		}
	}
	select {
	case h.queue <- struct{}{}:
	default:
		return fmt.Errorf("%w: mqtt %s: %d publishes in flight (mqtt.max_inflight)", publishers.ErrUnavailable, h.addr, cap(h.queue))
	}
	if s == nil {
		return p.awaitSession(h, topic, body, done)
	}
	return p.goSend(h, s, topic, body, done)
}

// Ping implements publishers.Publisher: a connection of its own (CONNECT answered by a successful
// CONNACK, then DISCONNECT; before the host's first connection, the publishing connection, which
// learns the version), at most one per host at a time and its result reused for a second unless the
// host's connections showed news since.
func (p *Publisher) Ping(ctx context.Context, host int) error {
	h, err := p.host(host)
	if err != nil {
		return err
	}
	if p.isClosed() {
		return publishers.ErrClosed
	}
	select {
	case h.ping <- struct{}{}:
	case <-ctx.Done():
		return publishers.CtxErr(ctx)
	}
	defer func() { <-h.ping }()
	h.mu.Lock()
	if !h.pingAt.IsZero() && time.Since(h.pingAt) < pingReuse && h.news() == h.pingNews {
		err := h.pingErr
		h.mu.Unlock()
		return err
	}
	news, first := h.news(), !h.hadConn
	h.mu.Unlock()
	if first {
		// The version comes on the publishing connection ($SYS/broker/version, which watch subscribes
		// to): before the first publish the check makes that connection, so GET / names the version at
		// once. Its CONNACK proves the broker up as the check's own connection would.
		_, err = p.session(ctx, h)
	} else if s, derr := p.d.dial(ctx, h.addr, p.d.idBase+"-ping-"+fmt.Sprint(h.idx), nil, nil, func(error) {}); derr == nil {
		s.close()
		s.cancel()
	} else {
		err = fmt.Errorf("%w: mqtt %s: %w", publishers.ErrUnavailable, h.addr, derr)
	}
	if ctx.Err() == nil { // a caller that left says nothing about the host
		h.mu.Lock()
		h.pingAt, h.pingErr, h.pingNews = time.Now(), err, news
		h.mu.Unlock()
	}
	return err
}

// BrokerVersion is what host's broker said it runs (its retained $SYS/broker/version, e.g.
// "mosquitto version 2.0.11"; mochi-mqtt sends its number only, "2.7.9"; at most 128 bytes of it,
// invalid UTF-8 replaced); "" until a connection learned it, or when the broker has no $SYS.
func (p *Publisher) BrokerVersion(host int) string {
	h, err := p.host(host)
	if err != nil {
		return ""
	}
	if v := h.version.Load(); v != nil {
		return *v
	}
	return ""
}

// ConnCounts is host's connection set-ups since the publisher started (publishers.ConnCounter).
func (p *Publisher) ConnCounts(host int) publishers.ConnCounts {
	h, err := p.host(host)
	if err != nil {
		return publishers.ConnCounts{}
	}
	return publishers.ConnCounts{Opened: h.opened.Load(), Reopened: h.reopened.Load(), DialFailures: h.dialFailures.Load()}
}

// ProtocolErrors is how many times host's broker sent an acknowledgement answering nothing outstanding
// (an identifier never sent or not yet written, a second answer, a PUBCOMP before the PUBREL) or a
// malformed packet header; each closed the connection (publishers.ProtocolErrorCounter).
func (p *Publisher) ProtocolErrors(host int) uint64 {
	h, err := p.host(host)
	if err != nil {
		return 0
	}
	return h.protoErrs.Load()
}

// Conns is every host's ConnCounts, in Hosts order.
func (p *Publisher) Conns() []publishers.ConnCounts {
	out := make([]publishers.ConnCounts, len(p.hosts))
	for i := range p.hosts {
		out[i] = p.ConnCounts(i)
	}
	return out
}

// Close implements publishers.Publisher: it closes every connection (what is pending fails with
// ErrClosed) and waits for every goroutine of the publisher; it is idempotent.
func (p *Publisher) Close() error {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
	})
	p.wg.Wait()
	return nil
}
