package amqp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/mqtarget/mqtarget/publishers"
)

// Timings and bounds of the publisher (see doc.go).
const (
	// defaultMaxWait bounds how long a publish may stay unconfirmed: the connection of an older one is taken
	// for stalled, closed, and everything pending on it fails as unavailable. It is what bounds
	// PublishAsync (no deadline of its own): done runs within it plus a tick.
	defaultMaxWait = 30 * time.Second
	stallTick      = time.Second
	// writeStall bounds one write to the broker's socket. RabbitMQ pushes back through TCP (a blocked
	// connection stops reading), and the client library holds its locks across the write: without a
	// deadline a frozen broker would hold the connection, its shutdown included, for good.
	writeStall = 15 * time.Second
	closeWait  = time.Second // how long Close waits for the confirms of what was published
	queueLen   = 4096        // publishes queued per connection for its writer
	// maxInFlight bounds the unconfirmed publishes per connection (and the confirm buffer's use).
	maxInFlight = 1 << 16
	confirmBuf  = 1024 // confirms the client library may hand over before our listener takes them
	// maxDeclared bounds the queues remembered as declared per connection; past it the memory starts
	// afresh (a declaration again costs one round trip).
	maxDeclared = 4096
)

// Publisher publishes to AMQP 0-9-1 servers (RabbitMQ): amqp.connections_per_host connections per
// configured URL, one publishing channel on each, in confirm mode unless amqp.confirm is false. See
// doc.go.
type Publisher struct {
	cfg     Config
	tls     *tls.Config // nil: plain TCP
	hosts   []*host
	names   []string
	pool    *publishers.Pool[*link] // amqp.connections_per_host connections per host, each dialled on demand
	log     *slog.Logger
	backoff publishers.Backoff
	maxWait time.Duration // defaultMaxWait; tests shorten it
	stall   time.Duration // writeStall; tests shorten it

	closed    atomic.Bool
	closeOnce sync.Once
	wg        sync.WaitGroup // every connection's writer and listener, and the pings (the pool owns the dials)
}

// New creates the publisher. It does not connect: each host's connection is made on first use and
// again after it broke.
func New(c Config, log *slog.Logger) (*Publisher, error) {
	if err := c.Validate("amqp"); err != nil {
		return nil, err
	}
	if len(c.URLs) == 0 {
		return nil, errors.New("amqp.urls: at least one URL is required")
	}
	tc, err := c.TLSConfig.Client("amqp")
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{cfg: c, tls: tc, log: log.With("broker", "amqp"), backoff: publishers.DefaultBackoff(), maxWait: defaultMaxWait, stall: writeStall}
	byName := map[string]*host{} // Validate refuses two URLs naming the same server and vhost
	for _, s := range c.URLs {
		srv, err := parse(s)
		if err != nil { // Validate passed: not reached
			return nil, err
		}
		h := &host{srv: srv}
		p.hosts = append(p.hosts, h)
		p.names = append(p.names, srv.name)
		byName[srv.name] = h
	}
	p.pool = publishers.NewPool("amqp", p.names, c.ConnectionsPerHost, func(ctx context.Context, name string) (*link, error) {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		defer cancel()
		return p.connect(ctx, byName[name])
	})
	p.pool.Log = p.log
	p.pool.Backoff = p.backoff
	return p, nil
}

// Hosts implements publishers.Publisher: each URL's host:port, with /vhost unless it is "/"; never a
// credential.
func (p *Publisher) Hosts() []string { return p.names }

// ValidateTopic implements publishers.Publisher.
func (p *Publisher) ValidateTopic(name string) error { return ValidateTopic(name) }

// Publish implements publishers.Publisher: one basic.publish, answered by the broker's confirm.
func (p *Publisher) Publish(ctx context.Context, host int, topic string, body []byte) error {
	return await(ctx, func(done func(error)) error { return p.send(ctx, host, topic, [][]byte{body}, done) })
}

// PublishBatch implements publishers.Publisher: the bodies published back to back on one channel and
// acknowledged together (AMQP 0-9-1 has no batch: tx.select cannot be combined with confirms); nil
// once every one is confirmed, an error when any is not.
func (p *Publisher) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if len(bodies) == 0 {
		return errors.New("amqp: empty batch")
	}
	return await(ctx, func(done func(error)) error { return p.send(ctx, host, topic, bodies, done) })
}

// PublishAsync implements publishers.Publisher: it queues the publish for the host's writer and
// returns; done runs when the confirm arrives (on the connection's notifier, in order, so a slow one
// delays only the others), or when the connection fails (within maxWait), so it must be quick.
// While host's connection is being made the publish waits for it on the pool's goroutine.
func (p *Publisher) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	if err := p.check(host, topic); err != nil {
		return err
	}
	if l, ok := p.pool.Ready(host); ok {
		return l.enqueueAsync(topic, body, done)
	}
	return p.pool.GetAsync(host, func(l *link) error { return l.enqueueAsync(topic, body, done) }, done)
}

// Ping implements publishers.Publisher: host's connection is up (made now if there is none) and the
// broker answers on it (a channel opened and closed: one round trip). At most one check runs per host
// at a time and its result answers for the host (whichever of its connections is next) for a second,
// unless a connection was made or found lost since or the one checked died, so /readyz costs the
// broker nothing much whatever its rate. (Not publishers.PingLimit: the library's round trip takes no
// context, so a check outlives a caller that leaves, and the next caller waits for it.)
func (p *Publisher) Ping(ctx context.Context, host int) error {
	if err := p.checkHost(host); err != nil {
		return err
	}
	l, err := p.pool.Get(ctx, host)
	if err != nil {
		return err
	}
	h := p.hosts[host]
	for {
		h.pingMu.Lock()
		if h.pinging == nil && h.pingLink != nil && time.Since(h.pingAt) < pingReuse && h.pingEvents == p.pool.Events(host) && !h.pingLink.Dead() {
			err := h.pingErr
			h.pingMu.Unlock()
			return err
		}
		if h.pinging == nil {
			h.mu.Lock() // Close takes it after setting closed: a goroutine started here is one it waits for
			if p.closed.Load() {
				h.mu.Unlock()
				h.pingMu.Unlock()
				return publishers.ErrClosed
			}
			running := make(chan struct{})
			h.pinging = running
			events := p.pool.Events(host) // news during the check makes its result old
			p.wg.Go(func() {
				err := l.roundTrip()
				h.pingMu.Lock()
				h.pingAt, h.pingErr, h.pingLink, h.pingEvents = time.Now(), err, l, events
				h.pinging = nil
				h.pingMu.Unlock()
				close(running)
			})
			h.mu.Unlock()
		}
		running := h.pinging
		h.pingMu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return ctxErr(ctx)
		}
	}
}

// pingReuse is how long a Ping result answers for its host.
const pingReuse = time.Second

// BrokerVersion is what host's broker said it runs in its connection.start (product and version,
// e.g. "RabbitMQ 3.10.8"); "" until a connection told.
func (p *Publisher) BrokerVersion(host int) string {
	if p.checkHost(host) != nil {
		return ""
	}
	v, _ := p.hosts[host].version.Load().(string)
	return v
}

// ConnCounts is host's connection set-ups since the publisher started.
func (p *Publisher) ConnCounts(host int) publishers.ConnCounts {
	if p.checkHost(host) != nil {
		return publishers.ConnCounts{}
	}
	return p.pool.ConnCounts(host)
}

// ProtocolErrors is how many of host's connections were closed for a protocol violation: a confirm
// or return for nothing in flight, a confirm ahead of its publish, or what the client library itself
// refused (malformed frames).
func (p *Publisher) ProtocolErrors(host int) uint64 {
	if p.checkHost(host) != nil {
		return 0
	}
	return p.hosts[host].protocol.Load()
}

// Close fails what is queued, waits up to closeWait for the confirms of what was published, closes
// every connection, fails what is still unconfirmed with publishers.ErrClosed and waits for every
// goroutine. It is idempotent; a concurrent second call waits for the first.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		for _, h := range p.hosts {
			h.mu.Lock() // after this no ping starts: Ping checks closed under mu
			h.mu.Unlock()
		}
		p.pool.Close() // every connection shut down in parallel (each may wait closeWait), the dials ended
		p.wg.Wait()
	})
	p.wg.Wait()
	return nil
}

func (p *Publisher) checkHost(host int) error {
	if host < 0 || host >= len(p.hosts) {
		return fmt.Errorf("amqp: host %d out of range (%d hosts)", host, len(p.hosts))
	}
	return nil
}

// send hands a sync publish of bodies to host's writer, waiting for room in its queue until ctx ends
// (PublishAsync's full queue fails at once instead).
func (p *Publisher) send(ctx context.Context, host int, topic string, bodies [][]byte, done func(error)) error {
	if err := p.check(host, topic); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	l, err := p.pool.Get(ctx, host)
	if err != nil {
		return err
	}
	return l.enqueue(ctx, &request{ctx: ctx, topic: topic, bodies: bodies, done: done, left: len(bodies), at: time.Now()}, true)
}

// check refuses a publish before it reaches a connection.
func (p *Publisher) check(host int, topic string) error {
	if p.closed.Load() {
		return publishers.ErrClosed
	}
	if err := p.checkHost(host); err != nil {
		return err
	}
	if err := checkName(topic); err != nil {
		// Handlers validate topics first; a name AMQP cannot carry would fail the connection's writes.
		return wrap(publishers.ErrRejected, fmt.Errorf("topic %w", err))
	}
	return p.refusedBefore(p.hosts[host], topic)
}

// wrap attaches an error kind to err, both visible to errors.Is.
func wrap(kind, err error) error { return fmt.Errorf("%w: %w", kind, err) }

// ctxErr is ctx's error as the publishers' kinds: ErrTimeout for a deadline.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return wrap(publishers.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}

// await runs start with a done callback and waits for it or for ctx. When ctx ends first the publish
// goes on and its outcome is dropped: it is never sent again.
func await(ctx context.Context, start func(done func(error)) error) error {
	ch := make(chan error, 1) // buffered: done never blocks on a caller that left
	if err := start(func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// errProtocol marks a broker's protocol violation.
var errProtocol = errors.New("AMQP protocol violation by the broker")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}

// --- hosts and redial --------------------------------------------------------

// host is one configured server: what its connections learned, and its health check.
type host struct {
	srv      server
	protocol atomic.Uint64
	version  atomic.Value // string
	mu       sync.Mutex   // Close takes it after setting closed: a ping goroutine started under it is one Close waits for

	pingMu     sync.Mutex
	pinging    chan struct{} // closed when the check in progress ends; nil: none
	pingAt     time.Time
	pingErr    error
	pingLink   *link  // the connection pingErr is about
	pingEvents uint64 // the pool's events of the host before that check

	// refused and refusedExchange remember the routing keys (topics) and the exchange the broker
	// refused for want of permission (refusals.go).
	refused, refusedExchange publishers.Refusals
}

// handshake dials h, runs TLS and the AMQP handshake within ctx. g, when not nil, checks the
// confirms the broker sends from the first byte on.
func (p *Publisher) handshake(ctx context.Context, h *host, g *confirmGuard) (*amqp091.Connection, net.Conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", h.srv.addr)
	if err != nil {
		return nil, nil, wrap(publishers.ErrUnavailable, err)
	}
	// The client library's calls take no context: ctx's end aborts whatever waits on the broker.
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	conn := raw
	if p.tls != nil {
		tc := p.tls
		if tc.ServerName == "" {
			tc = tc.Clone()
			tc.ServerName, _, _ = net.SplitHostPort(h.srv.addr)
		}
		tlsConn := tls.Client(raw, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, nil, wrap(publishers.ErrUnavailable, fmt.Errorf("TLS handshake with %s: %w", h.srv.addr, err))
		}
		conn = tlsConn
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	ac, err := amqp091.Open(&stallConn{Conn: conn, stall: p.stall, guard: g}, amqp091.Config{
		SASL:      []amqp091.Authentication{&amqp091.PlainAuth{Username: h.srv.user, Password: h.srv.password}},
		Vhost:     h.srv.vhost,
		Heartbeat: p.cfg.Heartbeat,
		Locale:    "en_US",
		// Recovery stays nil: the library never reconnects, so it never republishes (see doc.go).
		Properties: amqp091.Table{"product": "mqtarget", "connection_name": "mqtarget"},
	})
	if err != nil {
		raw.Close()
		return nil, nil, handshakeErr(ctx, err, h.srv.addr)
	}
	h.version.Store(serverVersion(ac.Properties))
	return ac, raw, nil
}

// connect makes a connection to h, opens the publishing channel (confirm mode) and starts the
// connection's writer and listener, all within ctx.
func (p *Publisher) connect(ctx context.Context, h *host) (*link, error) {
	var g *confirmGuard
	if p.cfg.Confirm {
		g = &confirmGuard{}
	}
	ac, raw, err := p.handshake(ctx, h, g)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	l := &link{p: p, h: h, conn: ac, raw: raw, guard: g, queue: make(chan *request, queueLen),
		dead: make(chan struct{}), stop: make(chan struct{}), idle: make(chan struct{}),
		settle: make(chan struct{}, 1), listened: make(chan struct{}),
		inflight: map[uint64]*pending{}, declared: map[string]struct{}{}}
	if err := l.open(); err != nil {
		raw.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within amqp.dial_timeout: %w", err)
		}
		return nil, wrap(publishers.ErrUnavailable, fmt.Errorf("opening the publishing channel on %s: %w", h.srv.addr, err))
	}
	if !stop() { // ctx ended as the set-up completed: the connection may be closed already
		raw.Close()
		return nil, wrap(publishers.ErrUnavailable, errors.New("set-up not done within amqp.dial_timeout"))
	}
	if g != nil {
		g.link.Store(l)
	}
	p.wg.Add(3)
	go l.write()
	go l.listen()
	go l.notify()
	return l, nil
}

// handshakeErr classifies a failed AMQP handshake. All of it is ErrUnavailable (503), like every
// broker's refused connection: no message can go through it. Refused credentials or vhost keep the
// broker's own words (ErrRejected, 502, is a message's own refusal).
func handshakeErr(ctx context.Context, err error, addr string) error {
	var ae *amqp091.Error
	if errors.As(err, &ae) && ae.Server {
		return wrap(publishers.ErrUnavailable, fmt.Errorf("AMQP handshake with %s refused: %d %s", addr, ae.Code, ae.Reason))
	}
	if errors.Is(err, amqp091.ErrCredentials) {
		return wrap(publishers.ErrUnavailable, fmt.Errorf("AMQP handshake with %s refused: %w", addr, err))
	}
	if ctx.Err() != nil {
		return wrap(publishers.ErrUnavailable, fmt.Errorf("AMQP handshake with %s: no answer within amqp.dial_timeout (%v)", addr, err))
	}
	return wrap(publishers.ErrUnavailable, fmt.Errorf("AMQP handshake with %s: %w", addr, err))
}

// serverVersion is what the broker's connection.start said it runs: "RabbitMQ 3.10.8".
func serverVersion(props amqp091.Table) string {
	product, _ := props["product"].(string)
	version, _ := props["version"].(string)
	switch {
	case product == "":
		return version
	case version == "":
		return product
	}
	return product + " " + version
}

// stallConn bounds each write to the broker (writeStall): a write that cannot go on for that long ends
// the connection. With a guard it also refuses the library a confirm it must not see.
type stallConn struct {
	net.Conn
	stall time.Duration
	guard *confirmGuard // nil: none
	scan  frameScan     // only the library's reader goroutine reads
	err   error         // the guard's violation: the connection reads nothing more
}

func (c *stallConn) Read(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(b)
	if c.guard != nil && n > 0 {
		if c.err = c.scan.feed(b[:n], c.guard.check); c.err != nil {
			// None of b is handed over: the library fails its reader and shuts the connection down.
			c.guard.fail(c.err)
			return 0, c.err
		}
	}
	return n, err
}

func (c *stallConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// --- one connection -----------------------------------------------------------

// request is one Publish, PublishBatch or PublishAsync: done runs once, when every body is resolved.
type request struct {
	ctx    context.Context
	topic  string
	bodies [][]byte
	done   func(error)
	left   int       // bodies not resolved yet (under link.mu once registered)
	err    error     // the first failure among them
	at     time.Time // when it was made: it waits for the writer from then
	async  bool      // PublishAsync's: done is the caller's code (await's never blocks)
}

// pending is one published body awaiting its confirm.
type pending struct {
	req      *request
	at       time.Time
	dc       *amqp091.DeferredConfirmation // set by the writer once the library took the publish
	arrived  bool                          // the confirm came (ack says which) before dc was set
	ack      bool
	returned error // a basic.return for it came first
}

// link is one connection to a host, with its publishing channel (pub), the channel declarations go on
// (decl, writer only), the writer that calls the library and the listener that reads its confirms.
type link struct {
	p     *Publisher
	h     *host
	conn  *amqp091.Connection
	raw   net.Conn      // closing it aborts everything at once
	guard *confirmGuard // nil without confirms

	pub                 *amqp091.Channel
	decl                *amqp091.Channel
	confirms            chan amqp091.Confirmation
	returns             chan amqp091.Return
	connClosed, pubDone chan *amqp091.Error
	blocks              chan amqp091.Blocking
	blocked             atomic.Pointer[string] // the broker's reason while it blocks publishing

	queue  chan *request
	sendMu sync.RWMutex // senders hold it shared; the writer takes it to drain the queue at the end
	// writing is the request the writer works on, nil while it waits: the oldest one not handed to
	// the library yet, as the queue is in order (checkStall reads its at, set before it was queued).
	writing  atomic.Pointer[request]
	answered atomic.Bool
	declared map[string]struct{} // writer only

	mu        sync.Mutex
	inflight  map[uint64]*pending // by delivery tag
	next      uint64              // last tag registered
	confirmed uint64              // last tag the library confirmed (it hands them over in sequence)
	closing   bool
	deadErr   error
	settled   []*request // async requests the listener settled, for the notifier
	backlog   int        // async dones queued for the notifier or running

	settle    chan struct{} // a request was settled (capacity 1)
	listened  chan struct{} // closed when the listener ended: nothing more is settled
	stop      chan struct{} // closed by shutdown: the writer takes nothing more
	idle      chan struct{} // closed when closing and nothing is in flight
	idleOnce  sync.Once
	dead      chan struct{}
	deadOnce  sync.Once
	closeOnce sync.Once
}

// open opens the channels and registers the listeners, before anything is published.
func (l *link) open() error {
	var err error
	if l.pub, err = l.conn.Channel(); err != nil {
		return err
	}
	if l.decl, err = l.conn.Channel(); err != nil {
		return err
	}
	l.connClosed = l.conn.NotifyClose(make(chan *amqp091.Error, 1))
	l.blocks = l.conn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	l.pubDone = l.pub.NotifyClose(make(chan *amqp091.Error, 1))
	if l.p.cfg.Confirm {
		if err := l.pub.Confirm(false); err != nil {
			return err
		}
		l.confirms = l.pub.NotifyPublish(make(chan amqp091.Confirmation, confirmBuf))
		// Unbuffered: the library's reader hands a return over before it goes on to the confirm that
		// follows it, so the listener has recorded the return when it takes that confirm.
		l.returns = l.pub.NotifyReturn(make(chan amqp091.Return))
	}
	return nil
}

// Dead reports whether the connection failed or was closed (publishers.Link).
func (l *link) Dead() bool {
	select {
	case <-l.dead:
		return true
	default:
		return false
	}
}

// Answered reports whether the broker answered a publish on this connection (the pool's redial policy
// tells a broker that accepts and drops connections from one that served them).
func (l *link) Answered() bool { return l.answered.Load() }

// Err is why the link died (nil while it lives).
func (l *link) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadErr
}

// roundTrip opens and closes a channel: the broker answered on this connection. It returns when the
// broker answers or the connection ends (its heartbeat, or kill).
func (l *link) roundTrip() error {
	ch, err := l.conn.Channel()
	if err != nil {
		if e := l.Err(); e != nil {
			return e
		}
		return wrap(publishers.ErrUnavailable, fmt.Errorf("%s: opening a channel: %w", l.h.srv.name, err))
	}
	_ = ch.Close()
	l.answered.Store(true)
	return nil
}

// enqueue hands r to the writer.
func (l *link) enqueue(ctx context.Context, r *request, wait bool) error {
	l.sendMu.RLock()
	defer l.sendMu.RUnlock()
	if l.Dead() || l.stopped() {
		return l.refused()
	}
	if reason := l.blocked.Load(); reason != nil {
		return wrap(publishers.ErrUnavailable, fmt.Errorf("%s blocks publishing: %s", l.h.srv.name, *reason))
	}
	if !wait {
		select {
		case l.queue <- r:
			return nil
		default:
			return wrap(publishers.ErrUnavailable, fmt.Errorf("%d publishes queued for %s already", queueLen, l.h.srv.name))
		}
	}
	select {
	case l.queue <- r:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-l.dead:
		return l.refused()
	case <-l.stop:
		return l.refused()
	}
}

// enqueueAsync queues an async publish of body, failing at once when the writer's queue is full.
func (l *link) enqueueAsync(topic string, body []byte, done func(error)) error {
	ctx := context.Background()
	return l.enqueue(ctx, &request{ctx: ctx, topic: topic, bodies: [][]byte{body}, done: done, left: 1, at: time.Now(), async: true}, false)
}

func (l *link) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// refused is the error of a publish the dead link did not take: ErrClosed when the publisher closes,
// the link's failure (unavailable) otherwise.
func (l *link) refused() error {
	if l.p.closed.Load() {
		return publishers.ErrClosed
	}
	if err := l.Err(); err != nil {
		return err
	}
	return wrap(publishers.ErrUnavailable, errors.New("connection lost"))
}

// write is the writer: it takes requests in order and hands them to the library, so no caller ever
// waits on the library's locks or a socket write, and the delivery tags are the order of its calls.
func (l *link) write() {
	defer l.p.wg.Done()
	defer func() {
		// Senders hold sendMu while they may still put a request in; they leave on dead or stop.
		l.sendMu.Lock()
		defer l.sendMu.Unlock()
		for {
			select {
			case r := <-l.queue:
				r.done(l.refused())
			default:
				return
			}
		}
	}()
	for {
		select {
		case <-l.dead:
			return
		case <-l.stop:
			return
		case r := <-l.queue:
			l.writing.Store(r)
			l.publish(r)
			l.writing.Store(nil)
		}
	}
}

// publish declares r's queue when this connection has not yet, and publishes r's bodies.
func (l *link) publish(r *request) {
	if r.ctx.Err() != nil { // its caller left while it was queued: never sent
		r.done(ctxErr(r.ctx))
		return
	}
	if err := l.declare(r.topic); err != nil {
		r.done(err)
		return
	}
	if r.ctx.Err() != nil {
		r.done(ctxErr(r.ctx))
		return
	}
	msg := amqp091.Publishing{DeliveryMode: amqp091.Transient}
	if l.p.cfg.Durable {
		msg.DeliveryMode = amqp091.Persistent
	}
	exchange, mandatory := l.p.cfg.Exchange, l.p.cfg.Mandatory
	if !l.p.cfg.Confirm {
		for _, body := range r.bodies {
			if r.ctx.Err() != nil { // its caller was answered: the rest is not sent
				r.done(ctxErr(r.ctx))
				return
			}
			msg.Body = body
			if err := l.pub.Publish(exchange, r.topic, false, false, msg); err != nil {
				l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("publishing to %s: %w", l.h.srv.name, err)))
				r.done(l.Err()) // ErrClosed when Close was ending the link
				return
			}
		}
		r.done(nil) // written: the broker acknowledges nothing without confirms
		return
	}
	l.mu.Lock()
	if l.deadErr != nil {
		l.mu.Unlock()
		r.done(l.refused())
		return
	}
	if len(l.inflight)+l.backlog+len(r.bodies) > maxInFlight { // a stuck done holds the backlog
		n := len(l.inflight) + l.backlog
		l.mu.Unlock()
		r.done(wrap(publishers.ErrUnavailable, fmt.Errorf("%d publishes unconfirmed by %s or awaiting their done", n, l.h.srv.name)))
		return
	}
	first := l.next + 1
	now := time.Now()
	pends := make([]*pending, len(r.bodies))
	for i := range r.bodies { // all at once: a failure half-way fails the rest with the link
		pends[i] = &pending{req: r, at: now}
		l.inflight[first+uint64(i)] = pends[i]
	}
	l.next += uint64(len(r.bodies))
	l.guard.numbered.Store(l.next)
	l.mu.Unlock()
	for i, body := range r.bodies {
		if l.Dead() { // kill failed the rest already
			return
		}
		if r.ctx.Err() != nil { // its caller was answered (a timeout): the rest is not sent
			l.withdraw(r, first+uint64(i), pends[i:])
			return
		}
		tag := first + uint64(i)
		msg.Body = body
		msg.MessageId = strconv.FormatUint(tag, 10) // names the publish in a basic.return
		dc, err := l.pub.PublishWithDeferredConfirm(exchange, r.topic, mandatory, false, msg)
		if err != nil {
			l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("publishing to %s: %w", l.h.srv.name, err)))
			return
		}
		if dc == nil || dc.DeliveryTag != tag {
			l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("the client library numbered publish %d otherwise (%v)", tag, dc)))
			return
		}
		l.mu.Lock()
		var done *request
		var perr error
		if l.inflight[tag] == pends[i] {
			pends[i].dc = dc
			if pends[i].arrived {
				done, perr = l.resolve(tag, pends[i])
				done = l.toNotifier(done, perr)
			}
		}
		l.mu.Unlock()
		l.after(done, perr)
	}
}

// withdraw takes back the delivery tags from on, numbered for pends (the rest of r's bodies), which
// the writer will not hand to the library: they fail with r's context's error, and the next publish
// is numbered from again, as the library will number it. A confirm that came for one of them is a
// protocol violation (nothing was published with that tag).
func (l *link) withdraw(r *request, from uint64, pends []*pending) {
	err := ctxErr(r.ctx)
	var done *request
	var perr error
	l.mu.Lock()
	if l.deadErr != nil { // kill failed them
		l.mu.Unlock()
		return
	}
	for i, pend := range pends {
		tag := from + uint64(i)
		if pend.arrived {
			perr = protocolError("confirm of delivery tag %d, which was never published", tag)
		}
		if d := l.finish(tag, pend, err); d != nil {
			done = d
		}
	}
	if perr == nil {
		l.next = from - 1
		l.guard.numbered.Store(l.next)
		done = l.toNotifier(done, nil)
	}
	l.mu.Unlock()
	if perr != nil {
		l.violation(perr)
	}
	if done != nil { // finished here: kill does not see it
		done.done(done.err)
	}
}

// declare makes sure queue topic exists (and is bound to amqp.exchange), once per connection. It
// runs on the writer, on its own channel: a refusal closes only that channel.
func (l *link) declare(topic string) error {
	if _, ok := l.declared[topic]; ok {
		return nil
	}
	if l.decl == nil || l.decl.IsClosed() {
		ch, err := l.conn.Channel()
		if err != nil {
			l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("opening a channel on %s: %w", l.h.srv.name, err)))
			return l.Err() // ErrClosed when Close was ending the link
		}
		l.decl = ch
	}
	_, err := l.decl.QueueDeclare(topic, l.p.cfg.Durable, false, false, false, nil)
	what := "declaring queue"
	if err == nil && l.p.cfg.Exchange != "" {
		what = "binding queue " + strconv.Quote(topic) + " to exchange " + strconv.Quote(l.p.cfg.Exchange) + " with key"
		err = l.decl.QueueBind(topic, topic, l.p.cfg.Exchange, false, nil)
	}
	if err != nil {
		var ae *amqp091.Error
		if errors.As(err, &ae) && ae.Server && ae.Recover { // a channel exception: the broker's answer
			l.answered.Store(true)
			if ae.Code == amqp091.AccessRefused { // no configure permission on the queue, or none to bind it
				l.h.refused.Add(topic, ae.Reason)
			}
			return wrap(publishers.ErrRejected, fmt.Errorf("%s %q on %s: %d %s", what, topic, l.h.srv.name, ae.Code, ae.Reason))
		}
		// Close's connection.close deadline with a frozen broker fails a declaration under way: kill
		// then records ErrClosed, which is what the publish failed of.
		l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("%s %q on %s: %w", what, topic, l.h.srv.name, err)))
		return l.Err()
	}
	l.answered.Store(true)
	if len(l.declared) >= maxDeclared {
		clear(l.declared)
	}
	l.declared[topic] = struct{}{}
	return nil
}

// listen is the listener: it takes the confirms and returns the library hands over, in the order the
// broker sent them, checks each against what is in flight, and watches for a stalled broker. It
// runs until the library has shut the connection down.
func (l *link) listen() {
	defer l.p.wg.Done()
	defer close(l.listened) // after the last kill: it has settled what it settles
	tick := time.NewTicker(stallTick)
	defer tick.Stop()
	confirms, returns, blocks, pubDone, connClosed := l.confirms, l.returns, l.blocks, l.pubDone, l.connClosed
	for confirms != nil || returns != nil || blocks != nil || pubDone != nil || connClosed != nil {
		select {
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				l.kill(l.closeCause("the broker closed the publishing channel"))
				continue
			}
			l.confirm(c)
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			l.returned(r)
		case b, ok := <-blocks:
			switch {
			case !ok:
				blocks = nil
			case b.Active:
				reason := b.Reason
				l.blocked.Store(&reason)
				l.p.log.Warn("AMQP server blocks publishing (a resource alarm): publishes fail as unavailable until it unblocks", "host", l.h.srv.name, "reason", reason)
			default:
				l.blocked.Store(nil)
				l.p.log.Info("AMQP server unblocked publishing", "host", l.h.srv.name)
			}
		case e, ok := <-pubDone:
			if !ok {
				pubDone = nil
				continue
			}
			a, refused := parseAccessRefusal(e)
			if refused {
				l.p.noteRefusal(l.h, a)
			}
			l.killScoped(l.amqpErr("the publishing channel closed", e), a)
		case e, ok := <-connClosed:
			if !ok {
				connClosed = nil
				continue
			}
			l.kill(l.amqpErr("the connection closed", e))
		case <-tick.C:
			l.checkStall()
		}
	}
	l.kill(l.closeCause("the connection closed"))
}

// closeCause is the error of a link whose channel or connection went away without saying why.
func (l *link) closeCause(what string) error {
	return wrap(publishers.ErrUnavailable, fmt.Errorf("%s: %s", l.h.srv.name, what))
}

// amqpErr is the error of a link closed with e; one the client library raised because the broker's
// bytes were no valid AMQP (its reader's errors) is a protocol violation, counted unless the link was
// dead already (our own close makes the reader fail too).
func (l *link) amqpErr(what string, e *amqp091.Error) error {
	if e == nil {
		return l.closeCause(what)
	}
	err := fmt.Errorf("%s: %s: %d %s", l.h.srv.name, what, e.Code, e.Reason)
	if !e.Server && isMalformed(e.Reason) {
		if !l.Dead() {
			l.h.protocol.Add(1)
			l.p.log.Warn("AMQP protocol violation: the client library refused the broker's frames", "host", l.h.srv.name, "err", err)
		}
		err = fmt.Errorf("%w: %w", errProtocol, err)
	}
	return wrap(publishers.ErrUnavailable, err)
}

// malformed are the client library's errors for bytes that are no valid AMQP frame.
var malformed = []*amqp091.Error{amqp091.ErrFrame, amqp091.ErrFrameTooLarge, amqp091.ErrSyntax, amqp091.ErrFieldType,
	amqp091.ErrUnexpectedFrame, amqp091.ErrCommandInvalid}

func isMalformed(reason string) bool {
	for _, e := range malformed {
		if strings.Contains(reason, e.Reason) {
			return true
		}
	}
	// the library's errHeartbeatChannel and errHeartbeatPayload (unexported)
	return strings.Contains(reason, "heartbeats must be sent on channel 0") || strings.Contains(reason, "heartbeats should not have a payload")
}

// violation ends the link for a broker's protocol violation.
func (l *link) violation(err error) {
	l.h.protocol.Add(1)
	l.p.log.Warn("AMQP protocol violation: closing the connection", "host", l.h.srv.name, "err", err)
	l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("%s: %w", l.h.srv.name, err)))
}

// confirm takes the library's confirm c: the next tag in sequence, for a publish in flight.
func (l *link) confirm(c amqp091.Confirmation) {
	l.mu.Lock()
	if l.deadErr != nil {
		l.mu.Unlock()
		return
	}
	if c.DeliveryTag != l.confirmed+1 || c.DeliveryTag > l.next {
		last := l.next
		l.mu.Unlock()
		l.violation(protocolError("confirm of delivery tag %d, after %d, with %d published", c.DeliveryTag, l.confirmed, last))
		return
	}
	l.confirmed = c.DeliveryTag
	l.guard.confirmed.Store(c.DeliveryTag)
	pend := l.inflight[c.DeliveryTag]
	var done *request
	var err error
	if pend != nil {
		pend.arrived, pend.ack = true, c.Ack
		if pend.dc != nil {
			done, err = l.resolve(c.DeliveryTag, pend)
		} // else the writer resolves it once the library returned the publish
	}
	done = l.toNotifier(done, err)
	l.mu.Unlock()
	l.after(done, err)
}

// toNotifier hands an async request's done, settled without a violation, to the notifier and returns
// nil; it returns any other done for its caller to run. Under mu. Both the listener and the writer
// (which settles a publish whose confirm came before the library returned it) settle: neither may run
// the caller's code, which may be slow.
func (l *link) toNotifier(done *request, err error) *request {
	if done == nil || !done.async || err != nil {
		return done
	}
	l.settled = append(l.settled, done)
	l.backlog++
	select {
	case l.settle <- struct{}{}:
	default: // the notifier has been told already
	}
	return nil
}

// notify runs the dones of the async requests the listener settled, in order, off the listener: a
// done is the caller's code and may be slow, and the listener must keep taking what the library hands
// over (the library drops a basic.return it cannot hand over within 5 s: an unroutable publish would
// then pass for stored). It ends once the listener has and nothing is left.
func (l *link) notify() {
	defer l.p.wg.Done()
	for {
		l.mu.Lock()
		q := l.settled
		l.settled = nil
		l.mu.Unlock()
		for _, r := range q {
			r.done(r.err)
		}
		if len(q) > 0 {
			l.mu.Lock()
			l.backlog -= len(q)
			l.mu.Unlock()
			continue
		}
		select {
		case <-l.settle:
		case <-l.listened:
			l.mu.Lock()
			left := len(l.settled)
			l.mu.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// resolve settles pend (tag) once its confirm arrived and the writer set its dc; under mu. It returns
// the request to call done for when it was its last body, or a protocol violation.
func (l *link) resolve(tag uint64, pend *pending) (*request, error) {
	// The library settles a publish's dc when the broker's ack or nack for it arrives. A confirm in
	// sequence for a dc not settled is one the broker sent before the publish: the library kept it and
	// handed it over later; it acknowledges nothing.
	select {
	case <-pend.dc.Done():
	default:
		return nil, protocolError("confirm of delivery tag %d sent before it was published", tag)
	}
	if pend.dc.Acked() != pend.ack {
		return nil, protocolError("delivery tag %d both acked and nacked", tag)
	}
	l.answered.Store(true)
	var err error
	switch {
	case !pend.ack:
		err = wrap(publishers.ErrRejected, fmt.Errorf("%s nacked the message (basic.nack)", l.h.srv.name))
	case pend.returned != nil:
		err = pend.returned
	}
	return l.finish(tag, pend, err), nil
}

// finish removes tag from what is in flight with outcome err; under mu. It returns pend's request when
// that was its last body.
func (l *link) finish(tag uint64, pend *pending, err error) *request {
	delete(l.inflight, tag)
	if l.closing && len(l.inflight) == 0 {
		l.idleOnce.Do(func() { close(l.idle) })
	}
	r := pend.req
	if r.err == nil {
		r.err = err
	}
	if r.left--; r.left > 0 {
		return nil
	}
	return r
}

// after runs what resolve or finish returned, outside mu.
func (l *link) after(done *request, err error) {
	if err != nil {
		l.violation(err)
		return
	}
	if done != nil {
		done.done(done.err)
	}
}

// returned takes a basic.return: for a mandatory publish in flight, not confirmed yet (the broker
// returns before it confirms), named by the MessageId the writer gave it.
func (l *link) returned(r amqp091.Return) {
	tag, perr := strconv.ParseUint(r.MessageId, 10, 64)
	l.mu.Lock()
	if l.deadErr != nil {
		l.mu.Unlock()
		return
	}
	pend := l.inflight[tag]
	ok := perr == nil && pend != nil && !pend.arrived && pend.returned == nil && l.p.cfg.Mandatory
	if ok {
		pend.returned = wrap(publishers.ErrRejected, fmt.Errorf("%s returned the message: %d %s (no queue for routing key %q on exchange %q)",
			l.h.srv.name, r.ReplyCode, r.ReplyText, r.RoutingKey, r.Exchange))
	}
	l.mu.Unlock()
	if !ok {
		l.violation(protocolError("basic.return of message id %q, which is no mandatory publish awaiting its confirm", truncate(r.MessageId)))
	}
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// checkStall ends the link when its oldest unconfirmed publish, or the request the writer works on
// (which is older than any still queued), is older than maxWait. The writer may wait on the broker
// for good: a queue declaration it never answers, on a connection its heartbeats keep alive.
func (l *link) checkStall() {
	l.mu.Lock()
	oldest := l.inflight[l.confirmed+1]
	l.mu.Unlock()
	if oldest != nil && time.Since(oldest.at) > l.p.maxWait {
		l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("%s confirmed nothing for %v: connection taken for stalled", l.h.srv.name, l.p.maxWait)))
		return
	}
	if r := l.writing.Load(); r != nil && time.Since(r.at) > l.p.maxWait {
		l.kill(wrap(publishers.ErrUnavailable, fmt.Errorf("%s: a publish waited %v and more for the broker before it could be sent (an unanswered queue declaration?): connection taken for stalled",
			l.h.srv.name, l.p.maxWait)))
	}
}

// kill ends the link at once: the socket closes (no close handshake with a broker that broke) and
// everything in flight fails with err. Only the first call does anything.
func (l *link) kill(err error) { l.killScoped(err, accessRefusal{}) }

// killScoped is kill, the publishes in flight within refusal's scope failing as refused by it instead
// of with err (none for the zero refusal).
func (l *link) killScoped(err error, refusal accessRefusal) {
	l.deadOnce.Do(func() {
		l.mu.Lock()
		if l.closing {
			// Close is ending this link: whatever cut it short during closeWait (the close handshake's
			// deadline with a stalled broker, say), what is unconfirmed failed because of Close.
			err = publishers.ErrClosed
		}
		l.deadErr = err
		pends := l.inflight
		l.inflight = map[uint64]*pending{}
		l.mu.Unlock()
		close(l.dead)
		l.raw.Close()
		var refused error // for those within refusal's scope, unless Close took over
		if refusal.text != "" && !errors.Is(err, publishers.ErrClosed) {
			refused = l.refusedErr(refusal)
		}
		var done []*request
		l.mu.Lock()
		for tag, pend := range pends {
			e := err
			if refused != nil && refusal.covers(pend.req.topic) {
				e = refused
			}
			if r := l.finish(tag, pend, e); r != nil {
				done = append(done, r)
			}
		}
		l.mu.Unlock()
		for _, r := range done {
			r.done(r.err)
		}
	})
}

// Close ends the link (publishers.Link): the writer stops (failing what is queued), what was published
// gets closeWait for its confirms, then the connection closes (politely when nothing is unconfirmed,
// for at most another closeWait) and the rest fails with ErrClosed. The pool calls it at its Close
// and for a connection found dead; it is idempotent.
func (l *link) Close() { l.closeOnce.Do(l.shutdown) }

func (l *link) shutdown() {
	l.mu.Lock()
	l.closing = true
	if len(l.inflight) == 0 {
		l.idleOnce.Do(func() { close(l.idle) })
	}
	l.mu.Unlock()
	close(l.stop)
	t := time.NewTimer(closeWait)
	select {
	case <-l.idle:
		// A polite connection.close, cut at closeWait by closing the socket: its deadline does not
		// bound it, as the library's heartbeater pushes the read deadline forward on every frame it
		// reads (a blocked RabbitMQ keeps heartbeating) and stallConn sets the write deadline.
		cut := time.AfterFunc(closeWait, func() { l.raw.Close() })
		_ = l.conn.CloseDeadline(time.Now().Add(closeWait))
		cut.Stop()
	case <-l.dead:
	case <-t.C:
	}
	t.Stop()
	l.kill(publishers.ErrClosed)
}
