package rocketmq

// mqtarget's own RocketMQ send path (rocketmq.client: native): one pipelined remoting connection per
// broker on the shared connection core (publishers/wire), SEND_MESSAGE_V2 requests with the binary
// (ROCKETMQ) header, answers matched by opaque. rocketmq-client-go writes every request with four
// write(2) calls, reads answers unbuffered and hands each to a goroutine of its own, and builds JSON
// headers through maps and reflection (docs/benchmarks.md, "Where the time goes"); here many requests
// leave in one write and the answers are parsed in place by the connection's read loop.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// Client kinds (rocketmq.client).
const (
	ClientNative  = "native"
	ClientLibrary = "library"
)

// Remoting protocol constants (org.apache.rocketmq.remoting.protocol).
const (
	rmqCodeSendV2      = 310 // RequestCode.SEND_MESSAGE_V2
	rmqCodeSendBatch   = 320 // RequestCode.SEND_BATCH_MESSAGE
	rmqCodeHeartBeat   = 34  // RequestCode.HEART_BEAT
	rmqLanguageGo      = 9   // LanguageCode.GO
	rmqVersion         = 317 // what rocketmq-client-go sends
	rmqSerializeBinary = 1   // SerializeType.ROCKETMQ
	rmqFlagResponse    = 1   // RemotingCommand's RPC_TYPE bit
	rmqDefaultTopic    = "TBW102"
	// Queues the broker gives a topic it creates on first send (autoCreateTopicEnable), as the clients ask.
	rmqDefaultTopicQueues = 4
	rmqMaxFrame           = 64 << 20
)

// Response codes (ResponseCode) the native path treats specially.
const (
	rmqResSuccess           = 0
	rmqResSystemError       = 1
	rmqResSystemBusy        = 2
	rmqResServiceNotAvail   = 14
	rmqResNoPermission      = 16
	rmqResTopicNotExist     = 17
	rmqResFlushDiskTimeout  = 10 // stored, not flushed / not replicated in time: 504 (errRMQNotDurable)
	rmqResSlaveNotAvailable = 11
	rmqResFlushSlaveTimeout = 12
)

// Timings of the native connections.
const (
	rmqNativeStallGrace = time.Second      // how far past its deadline the oldest request may go unanswered
	rmqNativeCloseWait  = time.Second      // how long Close waits for the answers to requests written
	rmqNativeHeartBeat  = 30 * time.Second // the broker drops connections idle for 120 s
	rmqNativeIdle       = 95 * time.Second // it answers every heart-beat: three missed means dead
	rmqRouteTTL         = 30 * time.Second // as the library: routes are asked for again every 30 s
	rmqRouteRetry       = time.Second      // a route lacking the target broker, or auto-created, sooner
	rmqDialTimeout      = 3 * time.Second
	// rmqMaxInFlight bounds the requests outstanding per broker: the broker refuses (SYSTEM_BUSY) what
	// waited over 200 ms in its send queue (waitTimeMillsInSendQueue), and a pipelined connection can
	// queue far more than a broker answers in that time. Past it, publishes wait for a slot (within
	// their deadline) on our side instead.
	rmqMaxInFlight = 64
	// A connection is replaced before its sequence numbers leave rmqOpaques' domain.
	rmqMaxOpaque = 1<<30 - 1<<20
)

// errRMQNotSent marks failures where the request certainly never reached the broker, so that resending
// cannot store a message twice.
var errRMQNotSent = errors.New("request not sent")

// rmqNative is the native send path of a RocketMQ publisher; p owns it.
type rmqNative struct {
	p     *Publisher
	conns []rmqNativeSlot // per host
	done  chan struct{}   // closed by close: publishes waiting for an in-flight slot give up
	// root bounds the connections' dials beside rmqDialTimeout, and the route fetches and the waits of
	// async publishes (waitAsync): close ends it.
	root     context.Context
	stopDial context.CancelFunc
	// fixed is the part of every send header that never changes (group, default topic, flags).
	fixed []byte
	uniq  rmqUniqIDs

	routes   sync.Map // topic -> *rmqRoute
	mu       sync.Mutex
	closed   bool
	bg       sync.WaitGroup // route fetches and refreshes, dead connections being closed
	clientID string
	backoff  publishers.Backoff // the redial policy (DefaultBackoff; tests shorten it)
	proto    *publishers.ProtocolErrors
}

type rmqNativeSlot struct {
	cur      atomic.Pointer[rmqConn]
	mu       sync.Mutex             // guards since, mark, dialing and failed
	dialing  chan struct{}          // closed when the dial in progress ends; nil: none
	failed   error                  // the last dial's failure, for the callers that waited for it
	inFlight chan struct{}          // one token per outstanding request (rmqMaxInFlight)
	counts   publishers.HostConns   // connections made, replaced and failed (ConnCounts); the redial backoff
	since    time.Time              // when cur was made; zero once its loss was recorded
	mark     *publishers.AnswerMark // whether cur answered a request
	// waiting counts the host's async publishes waiting on a goroutine of ours (waitAsync), for their
	// bound: each holds a message.
	waiting publishers.AsyncWaiting
}

// rmqRoute is a topic's write queues per host, from the name server.
type rmqRoute struct {
	ready  chan struct{} // closed once queues (or err) is set
	err    error
	queues []int // per host: write queues on that broker, 0 when it has none
	// deflt: the name server knows no such topic; it is sent with the default topic, and a broker with
	// autoCreateTopicEnable creates it (what both clients do).
	deflt      bool
	at         atomic.Int64 // when it was fetched (Unix ns); a failed refresh moves it on
	refreshing atomic.Bool
	// A failed fetch (err set) is answered for retry, then fetched again: the name servers are dialled
	// under the redial policy, not once per request. failures counts the failed fetches in a row.
	failures int
	retry    time.Duration
}

func newRMQNative(p *Publisher) *rmqNative {
	n := &rmqNative{p: p, conns: make([]rmqNativeSlot, len(p.brokers)), done: make(chan struct{}), backoff: publishers.DefaultBackoff()}
	n.root, n.stopDial = context.WithCancel(context.Background())
	for i := range n.conns {
		n.conns[i].inFlight = make(chan struct{}, rmqMaxInFlight)
	}
	n.clientID = fmt.Sprintf("mqtarget@%d#%d", os.Getpid(), rmqInstance.Add(1))
	addrs := make([]string, len(p.brokers))
	for i, b := range p.brokers {
		addrs[i] = b.Addr
	}
	n.proto = publishers.NewProtocolErrors("rocketmq", addrs, p.log)
	n.uniq.init()
	// SendMessageRequestHeaderV2's short field names: a producerGroup, c defaultTopic, d
	// defaultTopicQueueNums, f sysFlag, h flag, j reconsumeTimes, k unitMode, l maxReconsumeTimes; the
	// per-message ones (b topic, e queueId, g bornTimestamp, i properties, m batch, n brokerName) follow.
	for _, kv := range [][2]string{
		{"a", p.cfg.Group}, {"c", rmqDefaultTopic}, {"d", strconv.Itoa(rmqDefaultTopicQueues)},
		{"f", "0"}, {"h", "0"}, {"j", "0"}, {"k", "false"}, {"l", "0"},
	} {
		n.fixed = rmqAppendKV(n.fixed, kv[0], kv[1])
	}
	return n
}

// ---------------------------------------------------------------- publishing

// rmqSend is one SEND_MESSAGE_V2 (one body) or SEND_BATCH_MESSAGE request.
type rmqSend struct {
	n      *rmqNative
	topic  string
	broker string
	queue  int
	bodies [][]byte
	ids    [][rmqUniqLen]byte // UNIQ_KEY per body, kept across resends
	op     rmqOpaques         // of the connection prepare chose
}

func (n *rmqNative) newSend(topic string, host int, bodies [][]byte) *rmqSend {
	s := &rmqSend{n: n, topic: topic, broker: n.p.brokers[host].Name, bodies: bodies, ids: make([][rmqUniqLen]byte, len(bodies))}
	for i := range s.ids {
		n.uniq.next(&s.ids[i])
	}
	return s
}

// publish sends bodies (one message, or a batch) to host and waits for the broker's answer or dl.
func (n *rmqNative) publish(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if err := n.check(host); err != nil {
		return err
	}
	dl := time.Now().Add(n.p.cfg.SendTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	// Until the request is written the caller may still leave: nothing was sent then.
	if err := n.ensureTopic(ctx, dl, topic); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return publishers.CtxErr(ctx)
	}
	s := n.newSend(topic, host, bodies)
	var err error
	for attempt := 0; ; attempt++ {
		err = n.sendOnce(ctx, dl, host, s)
		// Resend only what certainly stored nothing: never after a timeout or a lost connection.
		if err == nil || attempt >= n.p.cfg.Retries || !time.Now().Before(dl) || !rmqNativeNotStored(err) || rmqDenied(err) {
			break
		}
	}
	return n.result(err)
}

// sendOnce writes s on host's connection and waits for its answer until dl, whatever ctx does once the
// request is handed over.
func (n *rmqNative) sendOnce(ctx context.Context, dl time.Time, host int, s *rmqSend) error {
	c, err := n.prepare(ctx, dl, host, s)
	if err != nil {
		return err
	}
	t := time.NewTimer(time.Until(dl))
	defer t.Stop()
	sem := n.conns[host].inFlight
	if err := n.acquire(sem, t.C); err != nil {
		return err
	}
	ch := make(chan error, 1)
	if err := c.Send(dl, s.encode, func(err error) { <-sem; ch <- err }); err != nil {
		<-sem
		return fmt.Errorf("%w: %w", errRMQNotSent, n.sendRefused(err))
	}
	select {
	case err = <-ch:
	case <-t.C:
		// Ambiguous: the broker may have stored it. The connection's stall detection fails it if the
		// answer stays away past the grace.
		return publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("rocketmq broker %s did not answer within the send timeout", s.broker))
	}
	n.answered(s.topic, err)
	return err
}

// prepare picks s's queue from the topic's route and returns host's connection.
func (n *rmqNative) prepare(ctx context.Context, dl time.Time, host int, s *rmqSend) (*rmqConn, error) {
	r, err := n.route(ctx, dl, s.topic)
	if err != nil {
		return nil, err
	}
	if err := n.pickQueue(r, host, s); err != nil {
		return nil, err
	}
	c, err := n.conn(ctx, dl, host)
	if err == nil {
		s.op = c.op
	}
	return c, err
}

// prepareNow is prepare for a caller that must not wait (publishAsync): wait reports that the topic's
// creation, its route or host's connection is still under way (started here when none was).
func (n *rmqNative) prepareNow(host int, s *rmqSend) (c *rmqConn, wait bool, err error) {
	if !n.p.topicReady(s.topic) {
		return nil, true, nil
	}
	r, fetching, err := n.lookup(s.topic)
	if fetching != nil {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := n.pickQueue(r, host, s); err != nil {
		return nil, false, err
	}
	c, dialing, err := n.connNow(host)
	if dialing != nil {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	s.op = c.op
	return c, false, nil
}

// pickQueue picks s's queue on host from route r.
func (n *rmqNative) pickQueue(r *rmqRoute, host int, s *rmqSend) error {
	q := r.queues[host]
	if q == 0 {
		n.refreshSoon(s.topic, r)
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("%w: topic %s has no write queue on broker %s (name server route)", errRMQNotSent, s.topic, s.broker))
	}
	s.queue = int(n.p.queues[host].Add(1) % uint32(q))
	return nil
}

// ensureTopic runs RocketMQ.ensureTopic (rocketmq.create_topics) within dl.
func (n *rmqNative) ensureTopic(ctx context.Context, dl time.Time, topic string) error {
	if !n.p.cfg.CreateTopics {
		return nil
	}
	ctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	return n.p.ensureTopic(ctx, topic)
}

// publishAsync hands one message to host's connection; done runs with the outcome within the send
// timeout (or with ErrClosed at Close). What the publish needs and is not there yet (the topic's
// creation, its route, the connection, an in-flight slot) is waited for on a goroutine of the publisher's (waitAsync),
// never on the caller's: /sendAsync answers at once. With all of it at hand, the common case, it is
// handed to the connection here, without a goroutine.
func (n *rmqNative) publishAsync(host int, topic string, body []byte, done func(error)) error {
	if err := n.check(host); err != nil {
		return err
	}
	dl := time.Now().Add(n.p.cfg.SendTimeout)
	s := n.newSend(topic, host, [][]byte{body})
	c, wait, err := n.prepareNow(host, s)
	if wait {
		return n.waitAsync(host, s, dl, done)
	}
	if err != nil {
		return n.result(err)
	}
	select {
	case n.conns[host].inFlight <- struct{}{}:
	default:
		// rmqMaxInFlight requests outstanding: the publish waits for a slot on a goroutine of ours too
		// (the broker's answers free them), not on the caller's.
		return n.waitAsync(host, s, dl, done)
	}
	return n.sendAsyncHeld(c, host, s, dl, done)
}

// waitAsync runs publishAsync's waits on a goroutine close ends and waits for: the topic's creation,
// its route and host's connection, within the send timeout; then it hands s over, or gives done what
// ended the wait. At most MaxAsyncWaiting wait per host, beyond which it refuses at once.
func (n *rmqNative) waitAsync(host int, s *rmqSend, dl time.Time, done func(error)) error {
	waiting := &n.conns[host].waiting
	if !waiting.Take() {
		return fmt.Errorf("%w: %w", errRMQNotSent, waiting.Refusal(fmt.Sprint("rocketmq broker ", n.p.brokers[host]), "a connection or a topic route"))
	}
	if !n.own(func() {
		defer waiting.Done()
		ctx, cancel := context.WithDeadline(n.root, dl) // close cancels root
		defer cancel()
		err := n.ensureTopic(ctx, dl, s.topic)
		var c *rmqConn
		if err == nil {
			c, err = n.prepare(ctx, dl, host, s)
		}
		if err == nil {
			err = n.sendAsync(c, host, s, dl, done)
		}
		if err != nil {
			if n.root.Err() != nil { // close ended the wait
				err = publishers.ErrClosed
			}
			done(n.result(err))
		}
	}) {
		waiting.Done()
		return publishers.ErrClosed
	}
	return nil
}

// rmqAsync is one async publish handed to a connection. A refusal that stored nothing is resent on the
// same connection from the answer's callback, up to rocketmq.retries times: a burst of async publishes
// can fill the broker's send queue past its 200 ms budget, and it then refuses the late ones
// (SYSTEM_BUSY).
type rmqAsync struct {
	n    *rmqNative
	c    *rmqConn
	s    *rmqSend
	dl   time.Time
	sem  chan struct{}
	done func(error)
	t    *time.Timer
	cb   func(error) // answer, bound once for every Send
	// mu is held while done runs, and fired says it ran: the answer's callback, which Close waits for
	// (the connection's Close runs the callbacks it still holds), waits there for a timer's done under
	// way, so Close returns after that done too.
	mu       sync.Mutex
	fired    bool
	attempts int // callbacks run one after the other: each follows the Send its predecessor made
}

// sendAsync takes an in-flight slot (waiting within dl) and sends s on c; done runs once with the
// outcome, unless sendAsync returns an error.
func (n *rmqNative) sendAsync(c *rmqConn, host int, s *rmqSend, dl time.Time, done func(error)) error {
	wait := time.NewTimer(time.Until(dl))
	err := n.acquire(n.conns[host].inFlight, wait.C)
	wait.Stop()
	if err != nil {
		return n.result(err)
	}
	return n.sendAsyncHeld(c, host, s, dl, done)
}

// sendAsyncHeld is sendAsync with host's in-flight slot taken already.
func (n *rmqNative) sendAsyncHeld(c *rmqConn, host int, s *rmqSend, dl time.Time, done func(error)) error {
	sem := n.conns[host].inFlight
	a := &rmqAsync{n: n, c: c, s: s, dl: dl, sem: sem, done: done}
	a.cb = a.answer
	// The answer's callback stops the timer; the timer ends the wait at the send timeout, as the
	// library's async send does, before the connection's stall detection (deadline + grace) would.
	a.t = time.AfterFunc(time.Until(dl), a.expire)
	if err := c.Send(dl, s.encode, a.cb); err != nil {
		a.t.Stop()
		<-sem
		if !a.claim() {
			return nil // the timer answered already
		}
		return n.result(n.sendRefused(err))
	}
	return nil
}

func (a *rmqAsync) expire() {
	a.finish(publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("rocketmq broker %s did not answer within the send timeout", a.s.broker)))
}

func (a *rmqAsync) answer(err error) {
	n := a.n
	n.answered(a.s.topic, err)
	if err != nil && a.attempts < n.p.cfg.Retries && rmqNativeNotStored(err) && !rmqDenied(err) && time.Now().Before(a.dl) && !a.hasFired() {
		a.attempts++
		if a.c.Send(a.dl, a.s.encode, a.cb) == nil {
			return
		}
	}
	a.t.Stop()
	<-a.sem
	a.finish(err)
}

// finish runs done with err unless it ran already.
func (a *rmqAsync) finish(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.fired {
		a.fired = true
		a.done(a.n.result(err))
	}
}

// claim marks done as run without running it: false when it ran already (waiting for it to return).
func (a *rmqAsync) claim() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ok := !a.fired
	a.fired = true
	return ok
}

func (a *rmqAsync) hasFired() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fired
}

// sendRefused is sendRefused for this publisher.
func (n *rmqNative) sendRefused(err error) error {
	return publishers.SendRefused(n.p.closed.Load(), err)
}

// acquire takes an in-flight slot, waiting until expired fires or the publisher closes.
func (n *rmqNative) acquire(sem chan struct{}, expired <-chan time.Time) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-expired:
		return publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("%w: %d requests to the broker outstanding until the deadline", errRMQNotSent, rmqMaxInFlight))
	case <-n.done:
		return publishers.ErrClosed
	}
}

func (n *rmqNative) check(host int) error {
	if n.p.closed.Load() {
		return publishers.ErrClosed
	}
	if host < 0 || host >= len(n.p.brokers) {
		return fmt.Errorf("rocketmq: host %d out of range (%d brokers)", host, len(n.p.brokers))
	}
	return nil
}

// answered forgets the topic's route when the broker says the topic does not exist (deleted, or not
// yet created there), so the next send asks the name server again.
func (n *rmqNative) answered(topic string, err error) {
	var ce *admin.CodeError
	if errors.As(err, &ce) && ce.Code == rmqResTopicNotExist {
		if v, ok := n.routes.Load(topic); ok {
			n.routes.CompareAndDelete(topic, v)
		}
	}
}

// rmqNativeNotStored reports whether a failed send certainly left nothing in the broker: it was never
// written, or the broker refused it before storing (SYSTEM_BUSY: flow control; SERVICE_NOT_AVAILABLE:
// the store refuses puts; NO_PERMISSION; TOPIC_NOT_EXIST). A timeout or a connection lost after the
// write is ambiguous, and so is SYSTEM_ERROR, which the Java client does resend: RocketMQ 5.3.3 answers
// it also when the request failed after the put (an RPC hook or the static-topic offset mapping threw,
// UNKNOWN_ERROR, in-sync replicas not enough), and an async put may then answer the same request a second
// time. A CI run of TestRocketMQFaults/freeze (f415cc3) fits that: one message stored twice, and a
// second answer to a request on the same connection.
func rmqNativeNotStored(err error) bool {
	if errors.Is(err, errRMQNotSent) {
		return !errors.Is(err, publishers.ErrClosed)
	}
	var ce *admin.CodeError
	if errors.As(err, &ce) {
		switch ce.Code {
		case rmqResSystemBusy, rmqResServiceNotAvail, rmqResNoPermission, rmqResTopicNotExist:
			return true
		}
	}
	return false
}

// result maps an outcome onto the error kinds, as RocketMQ.result does for the library's.
func (n *rmqNative) result(err error) error {
	if err == nil {
		return nil
	}
	var ce *admin.CodeError
	switch {
	case errors.Is(err, wire.ErrStalled):
		// The broker stopped answering a connection this request was written to: whether it stored the
		// message is unknown, as after a timeout (the library's own timer answers 504 there too).
		return publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("%v", err))
	case errors.Is(err, publishers.ErrClosed), errors.Is(err, publishers.ErrTimeout), errors.Is(err, publishers.ErrUnavailable),
		errors.Is(err, publishers.ErrRejected), errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return publishers.Wrap(publishers.ErrTimeout, err)
	case errors.As(err, &ce):
		if rmqLoginRefused(err) {
			return errRMQLoginRefused(n.p.cfg, err)
		}
		switch ce.Code {
		case rmqResSystemError, rmqResSystemBusy, rmqResServiceNotAvail:
			return publishers.Wrap(publishers.ErrUnavailable, err)
		case rmqResFlushDiskTimeout, rmqResSlaveNotAvailable, rmqResFlushSlaveTimeout:
			return errRMQNotDurable(err)
		}
		return publishers.Wrap(publishers.ErrRejected, err)
	}
	return publishers.Wrap(publishers.ErrUnavailable, err)
}

// ---------------------------------------------------------------- routes

// route returns topic's route, asking the name server when it is not cached; a stale one is refreshed
// in the background.
func (n *rmqNative) route(ctx context.Context, dl time.Time, topic string) (*rmqRoute, error) {
	r, fetching, err := n.lookup(topic)
	if fetching != nil {
		return awaitRoute(ctx, dl, fetching) // a fetch is under way: wait for that
	}
	return r, err
}

// lookup is route without the wait: topic's route or why there is none, when that is known now;
// otherwise the route being fetched (the fetch started here when none was), to wait for.
func (n *rmqNative) lookup(topic string) (r, fetching *rmqRoute, err error) {
	v, ok := n.routes.Load(topic)
	if !ok {
		v, ok = n.routes.LoadOrStore(topic, &rmqRoute{ready: make(chan struct{})})
		if !ok {
			n.fetch(topic, v.(*rmqRoute), 0)
		}
	}
	r = v.(*rmqRoute)
	select {
	case <-r.ready:
	default:
		return nil, r, nil
	}
	if r.err != nil {
		if r.age() < r.retry {
			return nil, nil, r.err
		}
		// The failed route is swapped for the next fetch in one step, which counts on from its failures:
		// deleting it first let another request store a fetch of its own, the backoff started afresh
		// (20 name server connections in 0.5 s against a bound of 16).
		next := &rmqRoute{ready: make(chan struct{})}
		if !n.routes.CompareAndSwap(topic, r, next) {
			return n.lookup(topic) // another request replaced it: use what it stored
		}
		n.fetch(topic, next, r.failures)
		return nil, next, nil
	}
	if age := r.age(); age > rmqRouteTTL || (r.deflt && age > rmqRouteRetry) {
		n.refresh(topic, r)
	}
	return r, nil, nil
}

// awaitRoute waits within ctx and dl for r's fetch and returns its outcome.
func awaitRoute(ctx context.Context, dl time.Time, r *rmqRoute) (*rmqRoute, error) {
	ctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("%w: topic route: %w", errRMQNotSent, ctx.Err()))
	}
	if r.err != nil {
		return nil, r.err
	}
	return r, nil
}

// fetch fills r (just stored for topic) from the name servers, off the request path and under
// send_timeout, not the deadline of the request that found the route missing: a caller's deadline says
// nothing about the name servers, and a fetch it cut short went uncounted, so against a name server
// that never answers every publish dialled again at once (58 connections in 0.5 s with 5 ms deadlines,
// against a bound of 16). A failed fetch is answered for a backoff period.
func (n *rmqNative) fetch(topic string, r *rmqRoute, failures int) {
	finish := func(queues []int, deflt bool, err error) {
		if err != nil && n.root.Err() != nil {
			err = publishers.ErrClosed // close ended the fetch
		}
		r.queues, r.deflt, r.err = queues, deflt, err
		r.at.Store(time.Now().UnixNano())
		if err != nil {
			r.failures = failures + 1
			r.retry = n.backoff.Wait(r.failures)
		}
		close(r.ready)
	}
	if !n.background(func(ctx context.Context) { finish(n.fetchRoute(ctx, topic)) }) {
		n.routes.CompareAndDelete(topic, r)
		finish(nil, false, publishers.ErrClosed)
	}
}

// background runs f on a goroutine close waits for, with a send_timeout context that close ends;
// false (f not run) once the publisher is closed.
func (n *rmqNative) background(f func(ctx context.Context)) bool {
	return n.own(func() {
		ctx, cancel := context.WithTimeout(n.root, n.p.cfg.SendTimeout)
		defer cancel()
		f(ctx)
	})
}

// own runs f on a goroutine close waits for; false (f not run) once the publisher is closed.
func (n *rmqNative) own(f func()) bool {
	n.mu.Lock() // orders Add before close's Wait
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.bg.Go(f)
	return true
}

func (r *rmqRoute) age() time.Duration { return time.Duration(time.Now().UnixNano() - r.at.Load()) }

// refreshSoon refreshes a route that lacks a broker, at most every rmqRouteRetry.
func (n *rmqNative) refreshSoon(topic string, r *rmqRoute) {
	if r.age() > rmqRouteRetry {
		n.refresh(topic, r)
	}
}

// refresh replaces r by a fresh route, off the request path; one refresh per route at a time.
func (n *rmqNative) refresh(topic string, r *rmqRoute) {
	if r.refreshing.Swap(true) {
		return
	}
	n.background(func(ctx context.Context) {
		fresh := &rmqRoute{ready: make(chan struct{})}
		fresh.queues, fresh.deflt, fresh.err = n.fetchRoute(ctx, topic)
		fresh.at.Store(time.Now().UnixNano())
		close(fresh.ready)
		if fresh.err != nil {
			if n.root.Err() == nil { // not close ending it
				n.p.log.Warn("rocketmq: refreshing a topic route failed", "topic", topic, "err", fresh.err)
			}
			r.at.Store(time.Now().UnixNano()) // the old route serves another period
			r.refreshing.Store(false)
			return
		}
		n.routes.CompareAndSwap(topic, r, fresh)
	})
}

// fetchRoute asks the name servers in turn for topic's write queues per host; a topic they do not know
// gets the default topic's queues (at most rmqDefaultTopicQueues) on the brokers that auto-create topics.
func (n *rmqNative) fetchRoute(ctx context.Context, topic string) ([]int, bool, error) {
	var errs []error
	for _, ns := range n.p.cfg.NameServers {
		wq, err := n.p.admin.WriteQueues(ctx, ns, topic)
		deflt := false
		if err == nil && wq == nil {
			deflt = true
			wq, err = n.p.admin.WriteQueues(ctx, ns, rmqDefaultTopic)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ns, err))
			continue
		}
		queues := make([]int, len(n.p.brokers))
		for i, b := range n.p.brokers {
			queues[i] = wq[b.Name]
			if deflt {
				queues[i] = min(queues[i], rmqDefaultTopicQueues)
			}
		}
		return queues, deflt, nil
	}
	if ctx.Err() != nil {
		return nil, false, publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("%w: topic %s route: %w", errRMQNotSent, topic, errors.Join(errs...)))
	}
	return nil, false, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("%w: topic %s route: %w", errRMQNotSent, topic, errors.Join(errs...)))
}

// ---------------------------------------------------------------- connections

// conn returns host's live connection, dialling a new one when there is none. The dial is the slot's,
// not the caller's: it runs to rmqDialTimeout (or close) even when the caller leaves sooner, and each
// caller waits for it until its own ctx or dl only. Otherwise a caller would queue behind another's
// dial past its own deadline, and a handshake slower than every caller's deadline would never connect.
func (n *rmqNative) conn(ctx context.Context, dl time.Time, host int) (*rmqConn, error) {
	s := &n.conns[host]
	c, dialing, err := n.connNow(host)
	if dialing == nil {
		return c, err
	}
	t := time.NewTimer(time.Until(dl))
	defer t.Stop()
	select {
	case <-dialing:
	case <-ctx.Done():
		return nil, publishers.CtxErr(ctx)
	case <-t.C:
		return nil, publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("%w: rocketmq broker %s: still connecting at the send timeout", errRMQNotSent, n.p.brokers[host]))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch c := s.cur.Load(); {
	case rmqUsable(c):
		return c, nil
	case s.failed != nil:
		return nil, s.failed
	default: // it connected, and the connection is gone already
		return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("%w: rocketmq broker %s: connection lost right after it was made", errRMQNotSent, n.p.brokers[host]))
	}
}

// connNow is conn without the wait: host's live connection, or the dial to wait for (starting one when
// there is none), or why there is neither.
func (n *rmqNative) connNow(host int) (*rmqConn, <-chan struct{}, error) {
	if c := n.conns[host].cur.Load(); rmqUsable(c) {
		return c, nil, nil
	}
	return n.startDial(host)
}

// startDial returns host's usable connection, or the dial to wait for (starting one when there is
// none), or why there is neither (the host's backoff runs, the publisher closed).
func (n *rmqNative) startDial(host int) (*rmqConn, <-chan struct{}, error) {
	s := &n.conns[host]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dialing != nil {
		return nil, s.dialing, nil
	}
	old := s.cur.Load()
	if rmqUsable(old) {
		return old, nil, nil
	}
	b := n.p.brokers[host].String()
	if old != nil && old.Dead() && !s.since.IsZero() {
		lived := time.Since(s.since)
		s.since = time.Time{}
		s.counts.Lost(n.p.log, n.backoff, b, lived, s.mark.Answered(), publishers.Wrap(publishers.ErrUnavailable,
			fmt.Errorf("%w: %w", errRMQNotSent, publishers.LostErr("rocketmq broker "+b, lived, old.Err()))))
	}
	if err := s.counts.MayDial(); err != nil {
		return nil, nil, err
	}
	n.mu.Lock() // close sets closed under mu before it waits for bg
	if n.closed {
		n.mu.Unlock()
		return nil, nil, publishers.ErrClosed
	}
	n.bg.Add(1)
	n.mu.Unlock()
	s.dialing = make(chan struct{})
	go n.dialSlot(host, old, s.dialing)
	return nil, s.dialing, nil
}

// dialSlot makes host's connection, replacing old (nil: the first), and records the outcome for the
// callers waiting on done and for the host's backoff.
func (n *rmqNative) dialSlot(host int, old *rmqConn, done chan struct{}) {
	defer n.bg.Done()
	s := &n.conns[host]
	b := n.p.brokers[host].String()
	mark := &publishers.AnswerMark{}
	c, err := n.dial(n.root, host, mark)
	if n.root.Err() == nil || err == nil { // a dial stopped by close says nothing about the broker
		s.counts.Dialed(n.p.log, n.backoff, b, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(done)
	s.dialing, s.failed = nil, err
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed { // close ran while we dialled: it no longer sees this slot's new connection
		c.Close()
		s.failed = publishers.ErrClosed
		return
	}
	s.cur.Store(c)
	s.since, s.mark = time.Now(), mark
	s.counts.Connected(old != nil)
	if old != nil {
		// Close waits for its goroutines (and, for one replaced for its opaque range, its answers).
		n.bg.Add(1)
		go func() { defer n.bg.Done(); old.Close() }()
	}
}

// rmqConn is one native connection and the opaques of its requests.
type rmqConn struct {
	*wire.Conn
	op rmqOpaques
}

func rmqUsable(c *rmqConn) bool {
	if c == nil || c.Dead() {
		return false
	}
	_, cmds := c.Stats()
	return cmds < rmqMaxOpaque
}

// dial connects to host's broker; mark notes the connection's answers.
func (n *rmqNative) dial(ctx context.Context, host int, mark *publishers.AnswerMark) (*rmqConn, error) {
	b := n.p.brokers[host]
	dctx, cancel := context.WithTimeout(ctx, rmqDialTimeout)
	defer cancel()
	nc, err := n.p.admin.Dial(dctx, b.Addr) // the admin client's transport (TLS, when configured)
	if err != nil {
		return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("%w: rocketmq broker %s: %w", errRMQNotSent, b, err))
	}
	op := newRMQOpaques()
	return &rmqConn{op: op, Conn: wire.New(nc, wire.Config{
		Name:           "rocketmq",
		Read:           mark.Marking(func(r *bufio.Reader) (wire.Answer, error) { return readRMQAnswer(r, op) }),
		MaxWait:        n.p.cfg.SendTimeout,
		StallGrace:     rmqNativeStallGrace,
		IdleTimeout:    rmqNativeIdle,
		HeartBeat:      rmqNativeHeartBeat,
		HeartBeatFrame: n.heartBeat(),
		CloseWait:      rmqNativeCloseWait,
		Unavailable:    publishers.ErrUnavailable,
		Closed:         publishers.ErrClosed,
		Timeout:        publishers.ErrTimeout,
		ProtocolError:  n.proto.Hook(b.Addr),
		Log:            n.p.log,
	})}, nil
}

// heartBeat is the HEART_BEAT request that keeps an idle connection open (the broker closes
// connections silent for 120 s); opaque 0 is no command's, so its answer is ignored.
func (n *rmqNative) heartBeat() []byte {
	body, _ := json.Marshal(map[string]any{
		"clientID":        n.clientID,
		"producerDataSet": []map[string]string{{"groupName": n.p.cfg.Group}},
		"consumerDataSet": []any{},
	})
	var ext map[string]string
	if n.p.cfg.AccessKey != "" {
		ext = map[string]string{}
		admin.Sign(ext, body, n.credentials())
	}
	b, at := rmqAppendHeader(nil, rmqCodeHeartBeat, 0)
	for _, k := range rmqSortedKeys(ext) {
		b = rmqAppendKV(b, k, ext[k])
	}
	return rmqFinishFrame(b, at, body)
}

func (n *rmqNative) credentials() admin.Credentials {
	return admin.Credentials{AccessKey: n.p.cfg.AccessKey, SecretKey: string(n.p.cfg.SecretKey)}
}

// close fails what is pending with ErrClosed (the connections' Close) and waits for every goroutine.
func (n *rmqNative) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	close(n.done)
	n.stopDial() // a dial in progress ends, sees closed and closes what it made; bg waits for it
	var wg sync.WaitGroup
	for i := range n.conns {
		s := &n.conns[i]
		s.mu.Lock()
		c := s.cur.Load()
		s.mu.Unlock()
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
	n.bg.Wait()
}

// ---------------------------------------------------------------- framing

// encode appends s's request frame for sequence number seq to b (wire.Conn calls it under its lock).
func (s *rmqSend) encode(b []byte, seq uint64) []byte {
	n := s.n
	id := s.op.opaque(seq)
	code := rmqCodeSendV2
	if len(s.bodies) > 1 {
		code = rmqCodeSendBatch
	}
	if n.p.cfg.AccessKey != "" {
		return s.encodeSigned(b, id, code)
	}
	b, at := rmqAppendHeader(b, code, id)
	b = append(b, n.fixed...)
	b = rmqAppendKV(b, "b", s.topic)
	b = rmqAppendKVInt(b, "e", int64(s.queue))
	b = rmqAppendKVInt(b, "g", time.Now().UnixMilli())
	b = rmqAppendKV(b, "n", s.broker)
	if len(s.bodies) == 1 {
		b = rmqAppendKV(b, "m", "false")
		// i: the properties, "UNIQ_KEY\x01<id>\x02" as the clients set them
		b = rmqAppendKey(b, "i")
		b = binary.BigEndian.AppendUint32(b, uint32(len(rmqPropUniq)+rmqUniqLen+1))
		b = append(append(append(b, rmqPropUniq...), s.ids[0][:]...), 2)
		return rmqFinishFrame(b, at, s.bodies[0])
	}
	b = rmqAppendKV(b, "m", "true")
	b = rmqAppendKV(b, "i", "")
	hl := len(b)
	b = s.appendBatchBody(b)
	return rmqFinishFrameBody(b, at, hl)
}

// encodeSigned builds the header through a map, signed (ACL 1.0): the signature covers the sorted
// field values and the body.
func (s *rmqSend) encodeSigned(b []byte, id int32, code int) []byte {
	var body []byte
	props := ""
	if len(s.bodies) == 1 {
		body = s.bodies[0]
		props = rmqPropUniq + string(s.ids[0][:]) + "\x02"
	} else {
		body = s.appendBatchBody(nil)
	}
	ext := map[string]string{
		"a": s.n.p.cfg.Group, "b": s.topic, "c": rmqDefaultTopic, "d": strconv.Itoa(rmqDefaultTopicQueues),
		"e": strconv.Itoa(s.queue), "f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0",
		"i": props, "j": "0", "k": "false", "l": "0", "m": strconv.FormatBool(len(s.bodies) > 1), "n": s.broker,
	}
	if props == "" {
		// The broker reads a value of length 0 as null and signs it as "null": leave it out instead.
		delete(ext, "i")
	}
	admin.Sign(ext, body, s.n.credentials())
	b, at := rmqAppendHeader(b, code, id)
	for _, k := range rmqSortedKeys(ext) {
		b = rmqAppendKV(b, k, ext[k])
	}
	return rmqFinishFrame(b, at, body)
}

// appendBatchBody appends the bodies in MessageDecoder.encodeMessage's layout: total size, magic code
// 0, body CRC 0, flag 0, body length, body, properties length (2 bytes), properties.
func (s *rmqSend) appendBatchBody(b []byte) []byte {
	const propsLen = len(rmqPropUniq) + rmqUniqLen + 1
	for i, body := range s.bodies {
		b = binary.BigEndian.AppendUint32(b, uint32(4+4+4+4+4+len(body)+2+propsLen))
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
		b = binary.BigEndian.AppendUint16(b, uint16(propsLen))
		b = append(append(append(b, rmqPropUniq...), s.ids[i][:]...), 2)
	}
	return b
}

const rmqPropUniq = "UNIQ_KEY\x01"

// rmqAppendHeader appends the frame's length fields (patched by rmqFinishFrame) and the binary header
// up to its field map; at is where the frame starts.
func rmqAppendHeader(b []byte, code int, opaque int32) (_ []byte, at int) {
	at = len(b)
	b = append(b, 0, 0, 0, 0, rmqSerializeBinary, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	b = append(b, rmqLanguageGo)
	b = binary.BigEndian.AppendUint16(b, rmqVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(opaque))
	b = binary.BigEndian.AppendUint32(b, 0) // flag: a synchronous request
	b = binary.BigEndian.AppendUint32(b, 0) // no remark
	b = binary.BigEndian.AppendUint32(b, 0) // the field map's length, patched
	return b, at
}

// rmqFinishFrame patches the lengths of the frame started at at and appends body.
func rmqFinishFrame(b []byte, at int, body []byte) []byte {
	hl := len(b)
	return rmqFinishFrameBody(append(b, body...), at, hl)
}

// rmqFinishFrameBody patches the lengths of the frame started at at whose header ends at hl.
func rmqFinishFrameBody(b []byte, at, hl int) []byte {
	const fixed = 8 + 2 + 1 + 2 + 4 + 4 + 4 // frame lengths, code .. remark length
	binary.BigEndian.PutUint32(b[at+fixed:], uint32(hl-(at+fixed+4)))
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	headerLen := uint32(hl - at - 8)
	b[at+5], b[at+6], b[at+7] = byte(headerLen>>16), byte(headerLen>>8), byte(headerLen)
	return b
}

func rmqAppendKey(b []byte, k string) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(k))), k...)
}

func rmqAppendKV(b []byte, k, v string) []byte {
	b = rmqAppendKey(b, k)
	return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
}

func rmqAppendKVInt(b []byte, k string, v int64) []byte {
	b = rmqAppendKey(b, k)
	at := len(b)
	b = strconv.AppendInt(append(b, 0, 0, 0, 0), v, 10)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func rmqSortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rmqAnswer is what the native path reads of a remoting command.
type rmqAnswer struct {
	Code   int    `json:"code"`
	Opaque int32  `json:"opaque"`
	Flag   int    `json:"flag"`
	Remark string `json:"remark"`
}

// readRMQAnswer reads one frame and classifies it: responses answer the request whose opaque (made by
// op) they carry; requests from the broker and the heart-beat's answer (opaque 0) answer none. A
// response whose opaque op did not make, or a malformed frame, is a protocol violation.
func readRMQAnswer(r *bufio.Reader, op rmqOpaques) (wire.Answer, error) {
	a, err := readRMQFrame(r)
	if err != nil {
		return wire.Answer{}, err
	}
	if a.Flag&rmqFlagResponse == 0 || a.Opaque == 0 {
		return wire.Answer{}, nil
	}
	seq, ok := op.seq(a.Opaque)
	if !ok {
		return wire.Answer{}, publishers.ProtocolError("response with opaque %d, which no request of this connection had", a.Opaque)
	}
	ans := wire.Answer{Kind: wire.ByID, ID: seq}
	if a.Code != rmqResSuccess {
		ans.Err = &admin.CodeError{Code: a.Code, Remark: a.Remark}
	}
	return ans, nil
}

// readRMQFrame reads one frame, its header parsed in place (binary) or decoded (JSON), its body skipped.
func readRMQFrame(r *bufio.Reader) (rmqAnswer, error) {
	var a rmqAnswer
	head, err := r.Peek(8)
	if err != nil {
		return a, err
	}
	total := binary.BigEndian.Uint32(head[0:4])
	typ := head[4]
	hl := binary.BigEndian.Uint32(head[4:8]) & 0xFFFFFF
	if total < 4+hl || total > rmqMaxFrame {
		return a, publishers.ProtocolError("bad rocketmq frame: length %d, header %d", total, hl)
	}
	_, _ = r.Discard(8)
	var hdr []byte
	if int(hl) <= r.Size() {
		if hdr, err = r.Peek(int(hl)); err != nil {
			return a, err
		}
	} else {
		hdr = make([]byte, hl)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return a, err
		}
	}
	switch typ {
	case rmqSerializeBinary:
		err = parseRMQBinaryHeader(hdr, &a)
	case 0:
		err = json.Unmarshal(hdr, &a)
	default:
		err = fmt.Errorf("unsupported rocketmq serialize type %d", typ)
	}
	if err != nil {
		return a, publishers.ProtocolError("bad rocketmq header: %v", err)
	}
	if int(hl) <= r.Size() {
		_, _ = r.Discard(int(hl))
	}
	if _, err := r.Discard(int(total - 4 - hl)); err != nil {
		return a, err
	}
	return a, nil
}

// parseRMQBinaryHeader reads code, flag, opaque and remark of a ROCKETMQ-serialised header; the field
// map is not needed.
func parseRMQBinaryHeader(h []byte, a *rmqAnswer) error {
	const fixed = 2 + 1 + 2 + 4 + 4 + 4
	if len(h) < fixed {
		return errors.New("header too short")
	}
	a.Code = int(int16(binary.BigEndian.Uint16(h[0:2])))
	a.Opaque = int32(binary.BigEndian.Uint32(h[5:9]))
	a.Flag = int(int32(binary.BigEndian.Uint32(h[9:13])))
	rl := binary.BigEndian.Uint32(h[13:17])
	if uint64(rl) > uint64(len(h)-fixed) {
		return errors.New("remark beyond the header")
	}
	if rl > 0 && a.Code != rmqResSuccess {
		a.Remark = string(h[fixed : fixed+int(rl)])
	}
	return nil
}

// rmqOpaques maps a connection's sequence numbers (1 .. 2^30-1) to request opaques (1 .. 2^30) and back
// through a keyed permutation (a 4-round Feistel network on two 15-bit halves, keys random per
// connection): a broker cannot answer a request it did not get by counting from the opaques it saw,
// and an opaque that is no request's is told from ours. Opaque 0 stays the heart-beat's.
type rmqOpaques struct{ keys [4]uint32 }

const rmqOpaqueHalf = 1<<15 - 1

func newRMQOpaques() rmqOpaques {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var o rmqOpaques
	for i := range o.keys {
		o.keys[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	return o
}

func rmqRound(x, k uint32) uint32 {
	x ^= k
	x *= 0x9E3779B1
	x ^= x >> 15
	x *= 0x85EBCA77
	x ^= x >> 13
	return x & rmqOpaqueHalf
}

// opaque is the opaque of sequence number seq (below 2^30).
func (o rmqOpaques) opaque(seq uint64) int32 {
	l, r := uint32(seq>>15)&rmqOpaqueHalf, uint32(seq)&rmqOpaqueHalf
	for _, k := range o.keys {
		l, r = r, l^rmqRound(r, k)
	}
	return int32(l<<15|r) + 1
}

// seq inverts opaque: the sequence number whose opaque is op, if op is one.
func (o rmqOpaques) seq(op int32) (uint64, bool) {
	if op < 1 || op > 1<<30 {
		return 0, false
	}
	v := uint32(op - 1)
	l, r := v>>15, v&rmqOpaqueHalf
	for i := len(o.keys) - 1; i >= 0; i-- {
		l, r = r^rmqRound(l, o.keys[i]), l
	}
	seq := uint64(l<<15 | r)
	return seq, seq != 0
}

// ---------------------------------------------------------------- message ids

// rmqUniqLen is the length of a UNIQ_KEY in hex: 16 bytes, as MessageClientIDSetter makes them.
const rmqUniqLen = 32

// rmqUniqIDs makes UNIQ_KEYs in the clients' layout: a per-publisher prefix (IPv4 4 bytes, pid 2,
// random 4), then milliseconds since the start of the month (4) and a counter (2).
type rmqUniqIDs struct {
	prefix  [20]byte // hex
	month   int64    // the month's start, Unix ms
	counter atomic.Uint32
}

func (u *rmqUniqIDs) init() {
	var raw [10]byte
	copy(raw[:4], []byte{127, 0, 0, 1})
	binary.BigEndian.PutUint16(raw[4:6], uint16(os.Getpid()))
	_, _ = rand.Read(raw[6:])
	hex.Encode(u.prefix[:], raw[:])
	now := time.Now()
	u.month = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location()).UnixMilli()
}

func (u *rmqUniqIDs) next(dst *[rmqUniqLen]byte) {
	var raw [6]byte
	binary.BigEndian.PutUint32(raw[:4], uint32(time.Now().UnixMilli()-u.month))
	binary.BigEndian.PutUint16(raw[4:], uint16(u.counter.Add(1)))
	copy(dst[:20], u.prefix[:])
	hex.Encode(dst[20:], raw[:])
}

// Native publishes over mqtarget's own pipelined remoting connection per broker (rocketmq.client
// native). It shares discovery, topic creation, Ping and the versions with the library path's
// Publisher, which it embeds without its producers.
type Native struct {
	*Publisher
	native *rmqNative
}

// NewNative discovers the brokers from the name servers and creates topics (when configured); its
// connections are made by the first publishes.
func NewNative(c Config, topics []string, log *slog.Logger) (*Native, error) {
	p, err := newShared(c, topics, log)
	if err != nil {
		return nil, err
	}
	return &Native{Publisher: p, native: newRMQNative(p)}, nil
}

// Publish implements publishers.Publisher.
func (p *Native) Publish(ctx context.Context, host int, topic string, body []byte) error {
	return p.native.publish(ctx, host, topic, [][]byte{body})
}

// PublishBatch implements publishers.Publisher with one batch command (a RocketMQ batch).
func (p *Native) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	return p.native.publish(ctx, host, topic, bodies)
}

// PublishAsync implements publishers.Publisher.
func (p *Native) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	return p.native.publishAsync(host, topic, body, done)
}

// Ping is the library path's, reusing a result until the host's connections show news.
func (p *Native) Ping(ctx context.Context, host int) error {
	return p.pingWith(ctx, host, func(h int) uint64 { return p.native.conns[h].counts.Events() })
}

// Close ends the native connections, then what the paths share; it is idempotent.
func (p *Native) Close() error { return p.closeWith(p.native.close) }
