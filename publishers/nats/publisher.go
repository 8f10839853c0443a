package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mqtarget/mqtarget/publishers"
)

// Timings and bounds of the publisher.
const (
	// AsyncMaxWait bounds a PublishAsync: by then its done has run (ErrTimeout when no PubAck came).
	AsyncMaxWait = 5 * time.Second
	asyncMaxWait = AsyncMaxWait
	// maxAsync bounds the async publishes in flight per publisher: beyond it PublishAsync refuses
	// (ErrUnavailable) instead of queueing without limit.
	maxAsync = 16384
	// pingInterval and maxPingsOut: a server that stops answering (frozen, a dead link) is dropped and
	// redialled after about pingInterval·(maxPingsOut+1); nats.go's defaults wait 4 minutes.
	pingInterval = 2 * time.Second
	maxPingsOut  = 2
	// flusherTimeout bounds one write to the socket: a frozen server's full socket buffer fails the
	// connection instead of blocking the flusher.
	flusherTimeout = 5 * time.Second
	// replyPending bounds the PubAcks buffered for the reply handler (nats.go drops beyond, the
	// publishes then time out).
	replyPending = 1 << 16
	// forceEvery bounds the redials protocol violations force per host.
	forceEvery = time.Second
)

// Publisher publishes to independent nats-servers, one nats.go connection to each (see doc.go).
type Publisher struct {
	hosts     []string
	conns     []*hostConn
	jetstream bool
	stream    string // "": one stream per topic
	log       *slog.Logger

	mu        sync.Mutex // orders closed against async.Add, sending.Add and bg.Add
	closed    bool
	closeDone chan struct{}   // closed when the first Close has finished
	root      context.Context // ends at Close: what is pending fails with ErrClosed
	cancel    context.CancelFunc
	async     sync.WaitGroup // async publishes whose done has not run yet
	sending   sync.WaitGroup // enqueues in progress (writer.go)
	writers   sync.WaitGroup // the hosts' writers
	bg        sync.WaitGroup // flushes and stream look-ups (goOwned)
	slots     chan struct{}  // maxAsync
}

// hostConn is the connection to one configured server and what mqtarget keeps about it.
type hostConn struct {
	host  int
	addr  string
	nc    *nats.Conn
	sub   *nats.Subscription // the PubAcks, on prefix+"*" (JetStream only)
	reply string             // reply subject prefix, ending in '.' (JetStream only)
	out   chan outJob        // the writer's queue (writer.go)
	quit  chan struct{}      // closed by Close once nothing is enqueued any more: the writer drains and ends

	maxPayload atomic.Int64 // the server's max_payload, learned at each connection (0: not yet)
	// connectedAt (unix ns) and flaps: the current connection's start, and how many connections in a
	// row were lost before they proved themselves (publishers.Backoff's Healthy), which the reconnect
	// delay counts as failures
	connectedAt atomic.Int64
	flaps       atomic.Int32

	mu       sync.Mutex
	pending  map[uint64]*waiting // by reply token
	issued   uint64              // the last token issued
	answered answeredSet         // tokens recently answered: a second answer is a violation

	streams streams
	perms   perms // what the server refused (perms.go)
	// replyRefused: why the server refused the reply subscription, until the next connection
	replyRefused atomic.Pointer[string]
	version      atomic.Pointer[string]
	log          *slog.Logger

	// dialErr: why the last dial failed, until a connection is made (a refused login, say), for the
	// errors of the publishes it fails
	dialErr atomic.Pointer[string]

	opened, reopened, dialFailures, protocolErrors atomic.Uint64
	protoLogged                                    atomic.Bool
	forcedAt                                       atomic.Int64 // unix ns of the last redial a protocol error forced
}

// waiting is one publish's outstanding answer.
type waiting struct {
	check   func(*nats.Msg) error // checks the answer
	done    func(error)
	timer   *time.Timer // async publishes: asyncMaxWait
	async   bool
	subject string // what the publish went to: a refusal of it fails the publish
	nonce   uint64 // the reply subject's second half
}

// New creates the publisher and starts one connection per server (in parallel, each within
// nats.dial_timeout). A server that cannot be reached is redialled in the background with the shared
// backoff; publishes to it fail as unavailable until then.
func New(c Config, log *slog.Logger) (*Publisher, error) {
	if err := c.Validate("nats"); err != nil {
		return nil, err
	}
	if len(c.Servers) == 0 {
		return nil, errors.New("nats.servers: at least one server is required")
	}
	opts, err := c.options()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = publishers.LimitLog(log) // a failing server must not flood the log
	p := &Publisher{hosts: c.Servers, jetstream: c.JetStream, stream: c.Stream, log: log, slots: make(chan struct{}, maxAsync), closeDone: make(chan struct{})}
	p.root, p.cancel = context.WithCancel(context.Background())
	p.conns = make([]*hostConn, len(c.Servers))
	errs := make([]error, len(c.Servers))
	var wg sync.WaitGroup
	for i, addr := range c.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.conns[i], errs[i] = p.connect(i, addr, opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// options are the nats.go options every connection (publisher and consumer) uses.
func (c Config) options() ([]nats.Option, error) {
	tc, err := c.TLSConfig.Client("nats")
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name("mqtarget"),
		// One server per connection, never a seed list: no shuffling, no servers learned from INFO, no
		// resolving a name into several addresses to rotate through.
		nats.DontRandomize(), nats.IgnoreDiscoveredServers(), nats.SkipHostLookup(),
		// Nothing is kept while reconnecting: a publish during an outage fails at once (ErrUnavailable)
		// instead of being written, perhaps long after its caller gave up, once the server is back.
		nats.ReconnectBufSize(-1),
		nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), // the reconnect delay: hostConn.handlers
		nats.Timeout(c.DialTimeout),
		nats.PingInterval(pingInterval), nats.MaxPingsOutstanding(maxPingsOut),
		nats.FlusherTimeout(flusherTimeout),
		nats.NoCallbacksAfterClientClose(),
	}
	if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	if c.User != "" {
		pw, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("nats.password_file: %w", err)
		}
		opts = append(opts, nats.UserInfo(c.User, strings.TrimRight(string(pw), "\r\n")))
	}
	return opts, nil
}

// serverURL is the URL nats.go dials for addr.
func serverURL(addr string, tls bool) string {
	if tls {
		return "tls://" + addr
	}
	return "nats://" + addr
}

func (p *Publisher) connect(host int, addr string, opts []nats.Option) (*hostConn, error) {
	h := &hostConn{host: host, addr: addr, pending: map[uint64]*waiting{}, log: p.log, out: make(chan outJob, outQueue), quit: make(chan struct{})}
	h.streams.m = map[string]*streamState{}
	h.streams.update = make(chan struct{}, 1)
	if p.jetstream {
		// set before the connection's callbacks can read it (a refused reply subscription)
		h.reply = nats.NewInbox() + "."
	}
	opts = append(opts[:len(opts):len(opts)], h.handlers(p.log, "publisher")...)
	nc, err := nats.Connect(serverURL(addr, hasSecure(opts)), opts...)
	if err != nil {
		return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: %w", host, addr, err))
	}
	if nc.IsReconnecting() { // the first dial failed; nats.go redials in the background
		h.dialFailures.Add(1)
		h.dialFailed(nc.LastError())
	} else {
		if v := nc.ConnectedServerVersion(); v != "" { // known now, not only once the callback ran
			s := "nats-server " + v
			h.version.Store(&s)
		}
		h.maxPayload.Store(nc.MaxPayload())
	}
	h.nc = nc
	// Core NATS has no answers: its connection subscribes to nothing, so that only a permission
	// violation changes its last error (refusedSince).
	if p.jetstream {
		h.sub, err = nc.Subscribe(h.reply+"*", h.answer)
		if err == nil {
			err = h.sub.SetPendingLimits(replyPending, -1)
		}
		if err != nil {
			nc.Close()
			return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: reply subscription: %w", host, addr, err))
		}
	}
	p.writers.Add(1)
	go func() {
		defer p.writers.Done()
		p.writeLoop(h)
	}()
	return h, nil
}

// hasSecure tells whether opts ask for TLS (a tls:// URL makes nats.go insist on it).
func hasSecure(opts []nats.Option) bool {
	var o nats.Options
	for _, opt := range opts {
		_ = opt(&o)
	}
	return o.Secure
}

// handlers are the callbacks that count connections and learn the server's version.
func (h *hostConn) handlers(log *slog.Logger, role string) []nats.Option {
	learn := func(nc *nats.Conn) {
		h.dialErr.Store(nil)
		h.replyRefused.Store(nil) // subscribed anew: refused again, if at all, by the server's answer
		h.connectedAt.Store(time.Now().UnixNano())
		if v := nc.ConnectedServerVersion(); v != "" {
			s := "nats-server " + v
			h.version.Store(&s)
		}
		h.maxPayload.Store(nc.MaxPayload())
	}
	b := publishers.DefaultBackoff()
	return []nats.Option{
		// nats.go counts attempts afresh after every connection it made: a server that accepts and
		// then drops each connection would be redialled every Base. A connection lost before it proved
		// itself counts as a failure here, as in the shared policy (publishers.Backoff).
		nats.CustomReconnectDelay(func(attempts int) time.Duration { return b.Wait(attempts + 1 + int(h.flaps.Load())) }),
		nats.ConnectHandler(func(nc *nats.Conn) { h.opened.Add(1); learn(nc) }),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			h.opened.Add(1)
			h.reopened.Add(1)
			learn(nc)
			log.Info("nats "+role+" reconnected", "addr", h.addr)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			h.dialFailures.Add(1)
			h.dialFailed(err)
			log.Debug("nats "+role+" redial failed", "addr", h.addr, "err", err)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if at := h.connectedAt.Swap(0); at != 0 {
				if time.Since(time.Unix(0, at)) >= b.Healthy {
					h.flaps.Store(0)
				} else if h.flaps.Load() < 30 {
					h.flaps.Add(1)
				}
			}
			if err != nil {
				log.Warn("nats "+role+" connection lost; redialling with backoff", "addr", h.addr, "err", err)
			}
			// What was written on the lost connection is answered on it or never: fail it now (its
			// outcome is unknown, so unavailable, not rejected) instead of at its deadline.
			h.failAll(publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: connection lost before the PubAck (%v)", h.host, h.addr, err)))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats "+role+" error", "addr", h.addr, "err", err)
			h.onError(err)
		}),
	}
}

// Hosts implements publishers.Publisher.
func (p *Publisher) Hosts() []string { return p.hosts }

// ValidateTopic implements publishers.Publisher.
func (p *Publisher) ValidateTopic(name string) error { return ValidateTopic(name) }

// BrokerVersion is what host's server said it runs in its INFO ("nats-server 2.15.2"); "" until a
// connection to it was made.
func (p *Publisher) BrokerVersion(host int) string {
	if host < 0 || host >= len(p.conns) {
		return ""
	}
	if v := p.conns[host].version.Load(); v != nil {
		return *v
	}
	return ""
}

// ConnCounts are host's connection set-ups since the publisher started (publishers.ConnCounter).
func (p *Publisher) ConnCounts(host int) publishers.ConnCounts {
	if host < 0 || host >= len(p.conns) {
		return publishers.ConnCounts{}
	}
	h := p.conns[host]
	return publishers.ConnCounts{Opened: h.opened.Load(), Reopened: h.reopened.Load(), DialFailures: h.dialFailures.Load()}
}

// ProtocolErrors counts host's answers that were no valid answer to what mqtarget sent
// (publishers.ProtocolErrorCounter): a PubAck for another stream, malformed JSON, a reply to a token
// never issued.
func (p *Publisher) ProtocolErrors(host int) uint64 {
	if host < 0 || host >= len(p.conns) {
		return 0
	}
	return p.conns[host].protocolErrors.Load()
}

func (p *Publisher) hostConn(host int) (*hostConn, error) {
	if host < 0 || host >= len(p.conns) {
		return nil, fmt.Errorf("nats: host %d out of range (%d hosts)", host, len(p.conns))
	}
	if p.isClosed() {
		return nil, publishers.ErrClosed
	}
	return p.conns[host], nil
}

func (p *Publisher) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// scope returns ctx ending also at Close.
func (p *Publisher) scope(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.root, cancel)
	return ctx, func() { stop(); cancel() }
}

// ended is the error of a publish whose context ended: ErrClosed when Close ended it.
func (p *Publisher) ended(ctx context.Context) error {
	if p.root.Err() != nil {
		return publishers.ErrClosed
	}
	return publishers.CtxErr(ctx)
}

// Publish implements publishers.Publisher: it returns after the PubAck (JetStream) or the flush round
// trip (core NATS).
func (p *Publisher) Publish(ctx context.Context, host int, topic string, body []byte) error {
	return p.publishSync(ctx, host, topic, [][]byte{body})
}

// PublishBatch implements publishers.Publisher: one atomic JetStream batch (one PubAck for all) when
// the stream allows atomic publishes, otherwise the messages acknowledged together (each its PubAck).
func (p *Publisher) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if len(bodies) == 0 {
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d]: a batch needs at least one message", host))
	}
	return p.publishSync(ctx, host, topic, bodies)
}

func (p *Publisher) publishSync(ctx context.Context, host int, topic string, bodies [][]byte) error {
	h, err := p.hostConn(host)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil { // sends nothing for a caller that left
		return publishers.CtxErr(ctx)
	}
	if err := h.checkSize(bodies); err != nil {
		return err
	}
	if err := h.refused(topic); err != nil {
		return err
	}
	if !p.jetstream {
		m := h.mark()
		written := make(chan error, 1)
		if err := p.enqueue(ctx, h, outJob{msgs: coreMsgs(topic, bodies), written: func(err error) { written <- err }}); err != nil {
			return err
		}
		select {
		case err := <-written:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return p.ended(ctx)
		case <-p.root.Done():
			return publishers.ErrClosed
		}
		if err := p.flushOwned(ctx, h); err != nil {
			return err
		}
		if err := h.refusedSince(ctx, topic, m); err != nil {
			if ctx.Err() != nil {
				return p.ended(ctx)
			}
			return err
		}
		return nil
	}
	st, err := p.streamFor(ctx, h, topic)
	if err != nil {
		return err
	}
	res := make(chan error, 1)
	tokens, err := p.send(ctx, h, st, topic, bodies, func(err error) { res <- err }, false)
	if err != nil {
		return err
	}
	// Waiting on the caller's ctx and on Close directly, not on a ctx derived from both (scope): that
	// took 8 allocations and two turns of the root context's lock per publish (BenchmarkPublish).
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		h.forget(tokens) // its answer, should it come, is a late one
		return p.ended(ctx)
	case <-p.root.Done():
		h.forget(tokens) // Close fails what is pending; this one ends here all the same
		return publishers.ErrClosed
	}
}

// PublishAsync implements publishers.Publisher. done runs exactly once: with the PubAck's outcome,
// ErrTimeout after asyncMaxWait without one, or ErrClosed at Close. The first publishes to a topic wait
// for its stream to be looked up or created, on goroutines of the publisher's.
func (p *Publisher) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	h, err := p.hostConn(host)
	if err != nil {
		return err
	}
	if err := h.checkSize([][]byte{body}); err != nil {
		return err
	}
	if err := h.refused(topic); err != nil {
		return err
	}
	select {
	case p.slots <- struct{}{}:
	default:
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats: %d async publishes in flight, the most allowed", maxAsync))
	}
	free := func() { <-p.slots }
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		free()
		return publishers.ErrClosed
	}
	p.async.Add(1)
	p.mu.Unlock()
	finish := func(err error) { done(err); free(); p.async.Done() }
	ctx, cancel := context.WithTimeout(p.root, asyncMaxWait)
	refuse := func(err error) error { cancel(); free(); p.async.Done(); return err }
	if !p.jetstream {
		m := h.mark()
		written := func(err error) {
			if err != nil {
				cancel()
				finish(err)
				return
			}
			go func() { // owned: Close waits for p.async
				err := flush(ctx, h.nc)
				if err != nil && ctx.Err() == nil {
					err = h.unavailable(err)
				} else if err == nil {
					err = h.refusedSince(ctx, topic, m)
				}
				switch {
				case err != nil && p.root.Err() != nil:
					err = publishers.ErrClosed
				case err != nil && ctx.Err() != nil:
					err = publishers.CtxErr(ctx)
				}
				cancel()
				finish(err)
			}()
		}
		if err := p.enqueue(nil, h, outJob{msgs: coreMsgs(topic, [][]byte{body}), written: written}); err != nil {
			return refuse(err)
		}
		return nil
	}
	if err := ValidateTopic(topic); err != nil {
		return refuse(publishers.Wrap(publishers.ErrRejected, err))
	}
	if st := h.readyStream(topic); st != nil {
		cancel()
		if _, err := p.send(nil, h, st, topic, [][]byte{body}, finish, true); err != nil {
			return refuse(err)
		}
		return nil
	}
	if !h.nc.IsConnected() { // the look-up would fail at once (no reconnect buffer): say so now
		return refuse(h.unavailable(nats.ErrReconnectBufExceeded))
	}
	// The topic's stream is not known yet: the publish waits for its look-up on a goroutine of its own
	// (owned: Close waits for p.async; the slots bound how many), never on the caller's.
	go func() {
		st, err := p.streamFor(ctx, h, topic)
		cancel()
		if err == nil {
			if _, err = p.send(nil, h, st, topic, [][]byte{body}, finish, true); err == nil {
				return
			}
		}
		if p.root.Err() != nil {
			err = publishers.ErrClosed
		}
		finish(err)
	}()
	return nil
}

// coreMsgs are bodies as core NATS messages to topic.
func coreMsgs(topic string, bodies [][]byte) []*nats.Msg {
	msgs := make([]*nats.Msg, len(bodies))
	for i, b := range bodies {
		msgs[i] = &nats.Msg{Subject: topic, Data: b}
	}
	return msgs
}

// checkSize refuses a message over the server's max_payload before it is queued (nats.go would refuse
// it at the write, after PublishAsync's caller was told it was accepted).
func (h *hostConn) checkSize(bodies [][]byte) error {
	if maxp := h.maxPayload.Load(); maxp > 0 {
		for _, b := range bodies {
			if int64(len(b)) > maxp {
				return publishers.Wrap(publishers.ErrTooLarge, fmt.Errorf("nats.servers[%d] %s: %w: a %d-byte message (max_payload %d)", h.host, h.addr, nats.ErrMaxPayload, len(b), maxp))
			}
		}
	}
	return nil
}

// send publishes bodies into stream st with replies, registering what answers them: one token for an
// atomic batch (its commit is answered), else one per message, done running once all answered. The
// messages go to h's writer, waited for under ctx (nil: refused when its queue is full). It returns
// the tokens; on an error nothing is registered and done is not called.
func (p *Publisher) send(ctx context.Context, h *hostConn, st *streamState, topic string, bodies [][]byte, done func(error), async bool) ([]uint64, error) {
	msgs := make([]*nats.Msg, len(bodies))
	for i, b := range bodies {
		msgs[i] = &nats.Msg{Subject: topic, Data: b}
	}
	n := len(bodies)
	var checks []func(*nats.Msg) error
	var replyAt []int // which message carries each token's reply
	switch {
	case n > 1 && st.atomic:
		id := nats.NewInbox()[len(nats.InboxPrefix):] // a NUID: unique, 22 bytes
		for i, m := range msgs {
			m.Header = nats.Header{"Nats-Batch-Id": {id}, "Nats-Batch-Sequence": {strconv.Itoa(i + 1)}}
		}
		msgs[n-1].Header.Set("Nats-Batch-Commit", "1")
		checks = []func(*nats.Msg) error{h.checker(st, id, n)}
		replyAt = []int{n - 1}
	default:
		for i := range msgs {
			checks = append(checks, h.checker(st, "", 0))
			replyAt = append(replyAt, i)
		}
		if n > 1 {
			done = publishers.Together(n, done)
		}
	}
	tokens, nonces := h.register(topic, checks, done, async)
	for i, t := range tokens {
		msgs[replyAt[i]].Reply = replySubject(h.reply, t, nonces[i])
	}
	if err := p.enqueue(ctx, h, outJob{msgs: msgs, tokens: tokens}); err != nil {
		if h.forget(tokens) == 0 {
			return tokens, nil // Close failed it already: done has run
		}
		return nil, err
	}
	return tokens, nil
}

// replySubject is a publish's reply subject, prefix + token + "_" + nonce (base 36), which answer
// parses: built in one allocation.
func replySubject(prefix string, token, nonce uint64) string {
	var b strings.Builder
	b.Grow(len(prefix) + 20 + 1 + 13)
	b.WriteString(prefix)
	var digits [20]byte
	b.Write(strconv.AppendUint(digits[:0], token, 10))
	b.WriteByte('_')
	b.Write(strconv.AppendUint(digits[:0], nonce, 36))
	return b.String()
}

// register records answers awaited, one token per check, and a random nonce for each, which its reply
// subject carries beside the token: a server that guesses the next token's answer before it got the
// publish (an answer ahead) cannot guess the nonce.
func (h *hostConn) register(subject string, checks []func(*nats.Msg) error, done func(error), async bool) ([]uint64, []uint64) {
	tokens, nonces := make([]uint64, len(checks)), make([]uint64, len(checks))
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range checks {
		h.issued++
		t := h.issued
		w := &waiting{check: c, done: done, async: async, nonce: rand.Uint64(), subject: subject}
		nonces[i] = w.nonce
		if async {
			w.timer = time.AfterFunc(asyncMaxWait, func() {
				if w := h.claim(t); w != nil {
					w.done(publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("nats.servers[%d] %s: no PubAck within %v", h.host, h.addr, asyncMaxWait)))
				}
			})
		}
		h.pending[t] = w
		tokens[i] = t
	}
	return tokens, nonces
}

// claim removes token's waiting entry; nil when it is no longer pending (answered, timed out, closed).
func (h *hostConn) claim(t uint64) *waiting {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.pending[t]
	if w == nil {
		return nil
	}
	delete(h.pending, t)
	if w.timer != nil {
		w.timer.Stop()
	}
	return w
}

// forget drops tokens whose caller left (sync publishes): their answers are late ones. It returns how
// many were still pending.
func (h *hostConn) forget(tokens []uint64) int {
	n := 0
	for _, t := range tokens {
		if h.claim(t) != nil {
			n++
		}
	}
	return n
}

// failAll fails every pending answer with err (Close).
func (h *hostConn) failAll(err error) { h.failWhere(nil, err) }

// failWhere fails each pending answer that match accepts (nil: every one) with err.
func (h *hostConn) failWhere(match func(*waiting) bool, err error) {
	h.mu.Lock()
	var ws []*waiting
	for t, w := range h.pending {
		if match != nil && !match(w) {
			continue
		}
		delete(h.pending, t)
		if w.timer != nil {
			w.timer.Stop()
		}
		ws = append(ws, w)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.done(err)
	}
}

// answer handles a message on the reply subjects (nats.go's subscription goroutine).
func (h *hostConn) answer(m *nats.Msg) {
	tok, nonceStr, _ := strings.Cut(strings.TrimPrefix(m.Subject, h.reply), "_")
	t, err := strconv.ParseUint(tok, 10, 64)
	nonce, nerr := strconv.ParseUint(nonceStr, 36, 64)
	if err != nil || nerr != nil || !strings.HasPrefix(m.Subject, h.reply) {
		h.protocolError(fmt.Errorf("a reply on %q, which no publish was given", m.Subject))
		return
	}
	h.mu.Lock()
	issued := h.issued
	h.mu.Unlock()
	if t == 0 || t > issued {
		h.protocolError(fmt.Errorf("a reply to token %d, never issued (the last is %d)", t, issued))
		return
	}
	h.mu.Lock()
	w := h.pending[t]
	twice := w == nil && h.answered.has(t)
	if w != nil && w.nonce == nonce {
		h.answered.add(t)
	}
	h.mu.Unlock()
	switch {
	case twice:
		h.protocolError(fmt.Errorf("a second answer to token %d", t))
		return
	case w != nil && w.nonce != nonce:
		h.protocolError(fmt.Errorf("a reply to token %d with a wrong nonce (an answer guessed, not given)", t))
		return
	}
	if w = h.claim(t); w == nil {
		return // a late answer: its publish ended already (timed out, its caller left)
	}
	w.done(w.check(m))
}

// errStreamNotFound is JetStream's err_code for a stream that does not exist (JSStreamNotFoundErr).
const errStreamNotFound = 10059

// pubAck is JetStream's answer to a publish.
type pubAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Batch     string `json:"batch"`
	Count     int    `json:"count"`
	Error     *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// checker checks an answer as a PubAck of stream st: for an atomic batch (batch != "") one that
// names the batch and counts its n messages.
func (h *hostConn) checker(st *streamState, batch string, n int) func(*nats.Msg) error {
	return func(m *nats.Msg) error {
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			// No responders: no stream holds the subject (deleted, or a server that lost it).
			h.streams.drop(st.topic)
			return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: no JetStream stream takes subject %q (it will be looked up again)", h.host, h.addr, st.topic))
		}
		var a pubAck
		if err := json.Unmarshal(m.Data, &a); err != nil {
			return h.protocolError(fmt.Errorf("the answer to a publish is not a PubAck: %.80q", m.Data))
		}
		if a.Error != nil {
			if a.Error.ErrCode == errStreamNotFound {
				h.streams.drop(st.topic)
			}
			return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: JetStream refused the publish: %s (code %d, err_code %d)",
				h.host, h.addr, a.Error.Description, a.Error.Code, a.Error.ErrCode))
		}
		switch {
		case a.Stream != st.name:
			return h.protocolError(fmt.Errorf("a PubAck of stream %q for a publish to stream %q", a.Stream, st.name))
		case a.Seq == 0:
			return h.protocolError(fmt.Errorf("a PubAck without a sequence: %.80q", m.Data))
		case a.Duplicate:
			return h.protocolError(errors.New("a PubAck saying duplicate for a message without a Nats-Msg-Id"))
		case a.Batch != batch || a.Count != n:
			return h.protocolError(fmt.Errorf("a PubAck for batch %q of %d messages, the publish was batch %q of %d", a.Batch, a.Count, batch, n))
		}
		return nil
	}
}

// protocolError counts an answer no correct server sends, logs the first, and returns the publish's
// error: unavailable, the answer says nothing about what the server stored.
//
// As for every broker here, the connection is then closed (nats.go redials it) and what was pending on it
// fails as unavailable: a server that answers wrongly once cannot be trusted with the rest. Forced
// redials are at most one per forceEvery per host, so a server that floods wrong answers makes a
// redial a second, not a loop.
func (h *hostConn) protocolError(err error) error {
	h.protocolErrors.Add(1)
	err = fmt.Errorf("nats.servers[%d] %s: protocol violation: %w", h.host, h.addr, err)
	if !h.protoLogged.Swap(true) {
		h.log.Warn("nats server broke the protocol: connection closed, what was pending on it failed as unavailable "+
			"(logged once per host; mqtarget_protocol_errors_total counts them)", "err", err)
	}
	err = publishers.Wrap(publishers.ErrUnavailable, err)
	if now := time.Now().UnixNano(); h.nc != nil && now-h.forcedAt.Load() >= int64(forceEvery) && h.nc.IsConnected() {
		h.forcedAt.Store(now)
		_ = h.nc.ForceReconnect()
	}
	h.failAll(err)
	return err
}

// publishErr maps nats.go's refusal to write a message.
func (h *hostConn) publishErr(err error) error {
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return publishers.Wrap(publishers.ErrTooLarge, fmt.Errorf("nats.servers[%d] %s: %w (max_payload %d)", h.host, h.addr, err, h.nc.MaxPayload()))
	case errors.Is(err, nats.ErrConnectionClosed):
		return publishers.ErrClosed
	case errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrHeadersNotSupported):
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: %w", h.host, h.addr, err))
	}
	return h.unavailable(err)
}

func (h *hostConn) unavailable(err error) error {
	if errors.Is(err, nats.ErrReconnectBufExceeded) {
		if why := h.dialErr.Load(); why != nil {
			err = fmt.Errorf("not connected (redialling with backoff; the last dial: %s)", *why)
		} else {
			err = errors.New("not connected (redialling with backoff)")
		}
	}
	return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: %w", h.host, h.addr, err))
}

// dialFailed keeps why a dial failed (nothing when nats.go gives no reason), cut at 256 bytes: a
// server's -ERR text reaches it.
func (h *hostConn) dialFailed(err error) {
	if err != nil {
		s := err.Error()
		if len(s) > 256 {
			s = strings.ToValidUTF8(s[:256], "") + "…"
		}
		h.dialErr.Store(&s)
	}
}

// Ping implements publishers.Publisher: a PING/PONG round trip on host's connection within ctx.
func (p *Publisher) Ping(ctx context.Context, host int) error {
	h, err := p.hostConn(host)
	if err != nil {
		return err
	}
	if err := p.flushOwned(ctx, h); err != nil {
		return err
	}
	return h.replyErr() // no PubAck can come back: not ready
}

// Close fails what is pending with ErrClosed, closes the connections and waits until every accepted
// PublishAsync's done has run. It is idempotent.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.closeDone
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.sending.Wait() // nothing is enqueued from here on
	for _, h := range p.conns {
		if h == nil {
			continue
		}
		if h.sub != nil {
			_ = h.sub.Unsubscribe()
		}
		h.nc.Close() // a write under way ends with it
		h.failAll(publishers.ErrClosed)
		close(h.quit)
	}
	p.writers.Wait()
	p.bg.Wait()
	p.async.Wait()
	close(p.closeDone)
	return nil
}

// flush is a PING/PONG round trip on nc within ctx, or within AsyncMaxWait when ctx has no deadline
// (nats.go refuses a flush without one).
func flush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, AsyncMaxWait)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}

// answeredSet remembers the last answeredKeep tokens answered, so a second answer to one is told from
// a late answer to a publish that ended without one (timed out, its caller left), which is no fault.
type answeredSet struct {
	ring [answeredKeep]uint64
	next int
	m    map[uint64]struct{}
}

const answeredKeep = 4096

func (a *answeredSet) add(t uint64) {
	if a.m == nil {
		a.m = make(map[uint64]struct{}, answeredKeep)
	}
	delete(a.m, a.ring[a.next])
	a.ring[a.next] = t
	a.m[t] = struct{}{}
	a.next = (a.next + 1) % answeredKeep
}

func (a *answeredSet) has(t uint64) bool {
	_, ok := a.m[t]
	return ok
}
