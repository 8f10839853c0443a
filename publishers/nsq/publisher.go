package nsq

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nsqio/go-nsq"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// Config configures the NSQ publisher.
type Config struct {
	// Hosts are nsqd TCP addresses (host:port). Empty means: start embedded nsqd instances.
	Hosts []string `yaml:"hosts" help:"nsqd TCP addresses host:port, comma-separated; empty starts embedded nsqd"`
	// ProducersPerHost is the number of TCP connections per nsqd. Commands on one connection are
	// pipelined and gathered into few writes, so one connection makes the fullest writes; more may help
	// an nsqd with many cores (it reads each connection on one goroutine).
	ProducersPerHost int `yaml:"producers_per_host" help:"producer TCP connections per nsqd host (1 makes the fullest writes)"`
	// DialTimeout bounds connecting to nsqd; it must not exceed the publish timeout.
	DialTimeout time.Duration `yaml:"dial_timeout" help:"timeout for connecting to nsqd (at most publish_timeout)"`
	// Embedded is the number of in-process nsqd instances started when Hosts is empty.
	Embedded int `yaml:"embedded" help:"number of in-process nsqd instances started when nsq.hosts is empty"`
	// EmbeddedMaxDisk bounds the disk each embedded nsqd fills with messages nobody consumes.
	EmbeddedMaxDisk int64 `yaml:"embedded_max_disk" help:"bytes of spilled messages each embedded nsqd keeps on disk; beyond it its largest queues are emptied"`
	// EmbeddedMaxMemory bounds the messages each embedded nsqd keeps in memory, whatever size and number
	// of topics clients ask for; the rest go to its disk queue (embedded.go).
	EmbeddedMaxMemory int64 `yaml:"embedded_max_memory" help:"bytes of messages each embedded nsqd keeps in memory, all its topics and channels together; beyond it its fullest queues are emptied (0: nsqd's 10000 messages per queue, no bound)"`
	// Coalesce sends concurrent single-message publishes to the same host and topic as one MPUB while
	// the previous command is in flight (no timer); each request still waits for its own message.
	Coalesce bool `yaml:"coalesce" help:"send concurrent /send1 publishes to one host and topic as one MPUB while the previous is in flight"`
	// AuthSecret is sent in AUTH to an nsqd that requires it (started with --auth-http-address: it asks
	// its auth server what the secret may do); an nsqd without auth is not sent it.
	AuthSecret publishers.Secret `yaml:"auth_secret" help:"secret for AUTH, sent to an nsqd started with --auth-http-address (never printed)"`
	// TLS: negotiated in IDENTIFY (tls_v1), for publishing and consuming alike.
	publishers.TLSConfig `yaml:",inline"`
}

// maxAuthSecret bounds nsq.auth_secret: nsqd passes it to its auth server in a URL query.
const maxAuthSecret = 1024

// DefaultConfig returns the NSQ defaults.
func DefaultConfig() Config {
	// One connection per host: with wrk -c50 against a separate nsqd it made 0.10 writes per request
	// (2: 0.17, 4: 0.32) at the same or lower CPU per request.
	return Config{ProducersPerHost: 1, DialTimeout: time.Second, Embedded: 3, EmbeddedMaxDisk: 1 << 30, EmbeddedMaxMemory: 64 << 20}
}

// Validate checks c; errors name the field under prefix (e.g. "nsq").
func (c Config) Validate(prefix string) error {
	var errs []error
	errs = append(errs, publishers.ValidateAddrs(prefix+".hosts", c.Hosts))
	if c.ProducersPerHost < 1 || c.ProducersPerHost > 64 {
		errs = append(errs, fmt.Errorf("%s.producers_per_host: must be 1..64, got %d", prefix, c.ProducersPerHost))
	}
	if c.DialTimeout <= 0 || c.DialTimeout > publishers.MaxDialTimeout {
		errs = append(errs, fmt.Errorf("%s.dial_timeout: must be 1ns..%v, got %v", prefix, publishers.MaxDialTimeout, c.DialTimeout))
	}
	if len(c.Hosts) == 0 && (c.Embedded < 1 || c.Embedded > 16) {
		errs = append(errs, fmt.Errorf("%s.embedded: must be 1..16 when %s.hosts is empty, got %d", prefix, prefix, c.Embedded))
	}
	if len(c.Hosts) == 0 && c.Embedded > 0 && (c.EmbeddedMaxDisk < 1<<20 || c.EmbeddedMaxDisk > publishers.MaxEmbeddedBytes) {
		errs = append(errs, fmt.Errorf("%s.embedded_max_disk: must be 1048576 (1 MiB)..%d (1 TiB) when %s.hosts is empty, got %d", prefix, int64(publishers.MaxEmbeddedBytes), prefix, c.EmbeddedMaxDisk))
	}
	if len(c.Hosts) == 0 && c.Embedded > 0 && (c.EmbeddedMaxMemory < 0 || c.EmbeddedMaxMemory > publishers.MaxEmbeddedBytes) {
		errs = append(errs, fmt.Errorf("%s.embedded_max_memory: must be 0..%d (1 TiB; 0: no bound), got %d", prefix, int64(publishers.MaxEmbeddedBytes), c.EmbeddedMaxMemory))
	}
	if len(c.AuthSecret) > maxAuthSecret {
		errs = append(errs, fmt.Errorf("%s.auth_secret: at most %d bytes, got %d", prefix, maxAuthSecret, len(c.AuthSecret)))
	} else if c.AuthSecret != "" && len(c.Hosts) == 0 {
		errs = append(errs, fmt.Errorf("%s.auth_secret: needs %s.hosts (embedded nsqd runs without auth)", prefix, prefix))
	}
	if c.TLSConfig.Enabled && len(c.Hosts) == 0 {
		errs = append(errs, fmt.Errorf("%s.tls: needs %s.hosts (embedded nsqd runs without TLS)", prefix, prefix))
	}
	errs = append(errs, c.TLSConfig.Validate(prefix))
	return errors.Join(errs...)
}

// Publisher publishes to one or more nsqd instances over the NSQ TCP protocol.
//
// It speaks the producer side of the protocol itself (pipelined PUB/MPUB with answers matched in order,
// heart-beats answered) on the shared connection core in publishers/wire, and uses go-nsq for the
// protocol's definitions. go-nsq's Producer cannot be used: it takes no context, writes one command per
// syscall, and reconnecting one after nsqd restarts is a data race in v1.1.0.
type Publisher struct {
	pool       *publishers.Pool[*nsqConn]
	dial       time.Duration
	tls        *tls.Config // nil: plain TCP
	secret     string      // nsq.auth_secret
	log        *slog.Logger
	coalesce   bool
	coalescers sync.Map             // coalesceKey → *coalescer, while busy
	versions   publishers.Versions  // what each nsqd said it runs (IDENTIFY)
	sizes      nsqSizes             // each nsqd's message size limit, probed at most once a minute
	pings      publishers.PingLimit // Ping's connections: one per host and pingReuse
	proto      *publishers.ProtocolErrors
	// refused: per host, topics nsqd refused (E_UNAUTHORIZED), shared by the hosts of one address
	// (byAddr, which the connections' readers fill: refusals.go)
	refused []*publishers.Refusals
	byAddr  map[string]*publishers.Refusals
}

// Timings of the connection handling.
const (
	nsqReadTimeout  = 65 * time.Second // idle: nsqd heart-beats every 30 s by default; two missed means dead
	nsqMaxWait      = 5 * time.Second  // bounds commands without a deadline (async publishes)
	nsqStallGrace   = time.Second      // how far past its deadline the oldest command may go unanswered
	nsqCloseWait    = time.Second      // how long Close waits for the answers to commands written
	nsqProbeTopic   = "mqtarget-size-probe"
	nsqProbeBodyLen = 1<<31 - 1
	nsqProbeEvery   = time.Minute // how long a size probe's answer (or failure) is reused
)

// New creates the publisher. It does not connect: connections are made on first use and again after
// one breaks, which lets mqtarget recover when nsqd comes back.
func New(c Config, log *slog.Logger) (*Publisher, error) {
	if err := c.Validate("nsq"); err != nil {
		return nil, err
	}
	if len(c.Hosts) == 0 {
		return nil, errors.New("nsq.hosts: at least one host is required")
	}
	tc, err := c.TLSConfig.Client("nsq")
	if err != nil {
		return nil, err
	}
	log = publishers.LimitLog(log) // a failing nsqd must not flood the log (lograte)
	p := &Publisher{dial: c.DialTimeout, tls: tc, secret: string(c.AuthSecret), log: log, coalesce: c.Coalesce, proto: publishers.NewProtocolErrors("nsq", c.Hosts, log)}
	p.refused, p.byAddr = newRefusals(c.Hosts)
	p.pool = publishers.NewPool("nsq", c.Hosts, c.ProducersPerHost, p.connect)
	p.pool.Log = log
	return p, nil
}

// Hosts implements Publisher.
func (p *Publisher) Hosts() []string { return p.pool.Addrs }

// nsqName is the byte set of nsqd's topic and channel names (go-nsq's IsValidTopicName, which
// topic_fuzz_test.go checks this against).
var nsqName = publishers.NewNameChars("._-")

// ValidateTopic applies nsqd's rules: 1-64 characters of [.a-zA-Z0-9_-], optionally ending in #ephemeral.
func (p *Publisher) ValidateTopic(name string) error { return validateNSQTopic(name) }

func validateNSQTopic(name string) error {
	if len(name) > 64 || !nsqName.All(strings.TrimSuffix(name, "#ephemeral")) {
		return fmt.Errorf("%q is not a valid NSQ topic (1-64 of [.a-zA-Z0-9_-], optional #ephemeral)", name)
	}
	return nil
}

// Publish implements Publisher with PUB, or through a coalescer with nsq.coalesce.
func (p *Publisher) Publish(ctx context.Context, host int, topic string, body []byte) error {
	if err := p.refusedBefore(host, topic); err != nil {
		return err
	}
	if p.coalesce {
		return p.publishCoalesced(ctx, host, topic, body)
	}
	return publishers.Await(ctx, func(done func(error)) error { return p.send(ctx, host, topic, body, nil, done) })
}

// PublishBatch implements Publisher with one MPUB.
func (p *Publisher) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if err := p.refusedBefore(host, topic); err != nil {
		return err
	}
	return publishers.Await(ctx, func(done func(error)) error { return p.send(ctx, host, topic, nil, bodies, done) })
}

// PublishAsync implements Publisher; done runs on the connection's read loop, so it must be quick.
// While host's connection is being made the publish waits for it on the pool's goroutine.
func (p *Publisher) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	if err := checkNSQTopicFraming(host, topic); err != nil {
		return err
	}
	if err := p.refusedBefore(host, topic); err != nil {
		return err
	}
	if conn, ok := p.pool.Ready(host); ok {
		return p.sendOn(conn, time.Time{}, host, topic, body, nil, done)
	}
	return p.pool.GetAsync(host, func(conn *nsqConn) error {
		return p.sendOn(conn, time.Time{}, host, topic, body, nil, done)
	}, done)
}

// send queues a PUB of body, or an MPUB of bodies when body is nil, on a connection to host.
func (p *Publisher) send(ctx context.Context, host int, topic string, body []byte, bodies [][]byte, done func(error)) error {
	if err := checkNSQTopicFraming(host, topic); err != nil {
		return err
	}
	conn, err := p.pool.Get(ctx, host)
	if err != nil {
		return err
	}
	by, _ := ctx.Deadline()
	return p.sendOn(conn, by, host, topic, body, bodies, done)
}

// sendOn is send on conn, the command dropped unwritten after by (zero: never).
func (p *Publisher) sendOn(conn *nsqConn, by time.Time, host int, topic string, body []byte, bodies [][]byte, done func(error)) error {
	// nsqd answers an oversize or empty message with a fatal error and closes the connection, failing
	// every other request on it: refuse such a message here instead.
	if err := conn.check(host, body, bodies); err != nil {
		return err
	}
	var err error
	if bodies == nil {
		err = conn.Send(by, func(b []byte, _ uint64) []byte { return appendPUB(b, topic, body) }, done)
	} else {
		err = conn.Send(by, func(b []byte, _ uint64) []byte { return appendMPUB(b, topic, bodies) }, done)
	}
	return publishers.SendRefused(p.pool.Closed(), err)
}

// Ping connects to host and identifies, within ctx and the dial timeout, on a connection of its own so
// a check never queues behind publishes.
func (p *Publisher) Ping(ctx context.Context, host int) error {
	if err := p.pool.CheckHost(host); err != nil {
		return err
	}
	return p.pings.Do(ctx, host, p.pool.Events, p.ping)
}

func (p *Publisher) ping(ctx context.Context, host int) error {
	// A plain connection to an nsqd with --tls-required identifies fine and is refused at its first
	// command: unless a producer connection lives, dial one (its size probe meets the refusal). Dialled,
	// it answers for the host; a failure other than that refusal (perhaps one kept by the pool's
	// backoff) is checked afresh below.
	if p.tls == nil && p.pool.Live(host) == nil {
		if _, err := p.pool.Get(ctx, host); err == nil || errors.Is(err, errNSQTLSRequired) {
			return err
		}
	}
	conn, _, err := p.handshake(ctx, p.pool.Addrs[host])
	if err != nil {
		return err
	}
	return conn.Close()
}

// Close closes every connection, failing what is still pending so every callback runs, and waits for
// the connections' goroutines. It is idempotent.
func (p *Publisher) Close() error {
	p.pool.Close()
	return nil
}

// nsqConn is one producer connection and the message size limit its nsqd announced or showed.
type nsqConn struct {
	*wire.Conn
	maxMsg int64 // nsqd's --max-msg-size; 0 when unknown
	publishers.AnswerMark
}

// connect dials a producer connection, learning nsqd's message size limit first.
func (p *Publisher) connect(ctx context.Context, addr string) (*nsqConn, error) {
	netConn, limit, err := p.handshake(ctx, addr)
	if err != nil {
		p.sizes.forget(addr) // an outage: nsqd may come back with another limit
		return nil, err
	}
	if limit == 0 {
		if limit, err = p.maxMsgSize(ctx, addr); errors.Is(err, errNSQTLSRequired) {
			netConn.Close()
			return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nsqd %s: %w: set nsq.tls", addr, err))
		} else if publishers.IsProtocolError(err) { // counted where it was found
			netConn.Close()
			return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nsqd %s: %w", addr, err))
		} else if err != nil {
			p.log.Warn("nsqd message size limit unknown: oversize messages will fail their connection", "addr", addr, "err", err)
		}
	}
	c := &nsqConn{maxMsg: limit}
	refused := p.byAddr[addr]
	read := func(r *bufio.Reader) (wire.Answer, error) {
		a, err := readNSQAnswer(r)
		if a.Err != nil && refused != nil {
			noteUnauthorized(refused, a.Err) // its own function: its error target would go to the heap on every read
		}
		return a, err
	}
	c.Conn = wire.New(netConn, wire.Config{
		Name:          "nsq",
		Read:          c.Marking(read),
		MaxWait:       nsqMaxWait,
		StallGrace:    nsqStallGrace,
		IdleTimeout:   nsqReadTimeout,
		CloseWait:     nsqCloseWait,
		Unavailable:   publishers.ErrUnavailable,
		Closed:        publishers.ErrClosed,
		Timeout:       publishers.ErrTimeout,
		ProtocolError: p.proto.Hook(addr),
		Log:           p.log,
	})
	return c, nil
}

// checkNSQTopicFraming refuses a topic that would not reach nsqd as one: nsqd ends a command line at
// a newline (dropping a CR before it) and splits it at spaces, so such a topic would publish to another
// topic or desynchronise the connection. Other invalid names go to nsqd, which refuses them.
func checkNSQTopicFraming(host int, topic string) error {
	if strings.ContainsAny(topic, " \n\r") {
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nsq.hosts[%d]: topic %q contains a space, CR or LF", host, topic))
	}
	return nil
}

// check refuses what nsqd would answer with a fatal error: an empty message, or one over its limit.
func (c *nsqConn) check(host int, body []byte, bodies [][]byte) error {
	if bodies == nil {
		return c.checkOne(host, body)
	}
	if len(bodies) == 0 {
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nsq.hosts[%d]: MPUB needs at least one message", host))
	}
	for _, b := range bodies {
		if err := c.checkOne(host, b); err != nil {
			return err
		}
	}
	return nil
}

func (c *nsqConn) checkOne(host int, body []byte) error {
	switch {
	case len(body) == 0:
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nsq.hosts[%d]: nsqd refuses empty messages", host))
	case c.maxMsg > 0 && int64(len(body)) > c.maxMsg:
		return publishers.Wrap(publishers.ErrTooLarge, fmt.Errorf("nsq.hosts[%d]: message of %d bytes exceeds nsqd's --max-msg-size %d", host, len(body), c.maxMsg))
	}
	return nil
}

// handshake dials addr, sends the protocol magic and IDENTIFY with feature negotiation, and reads nsqd's
// answer: JSON, from which it takes max_msg_size should nsqd announce it (v1.3.0 does not: limit 0).
// With nsq.tls, IDENTIFY asks for tls_v1 and, once nsqd agreed, the connection continues over TLS.
func (p *Publisher) handshake(ctx context.Context, addr string) (net.Conn, int64, error) {
	conn, ans, err := nsqHandshake(ctx, addr, p.dial, p.tls, p.secret)
	if err == nil && ans.Version != "" {
		p.versions.Set(addr, "nsqd "+ans.Version)
	}
	if publishers.IsProtocolError(err) {
		p.proto.Count(addr, err)
	}
	return conn, ans.MaxMsgSize, err
}

// nsqHandshake is handshake for the publisher and the consumer's check: within ctx and timeout, over TLS
// with tc when it is not nil, then AUTH with secret when nsqd requires it. Every refusal is
// ErrUnavailable (503), as a refused connection is on every broker.
func nsqHandshake(ctx context.Context, addr string, timeout time.Duration, tc *tls.Config, secret string) (net.Conn, nsqIdentifyAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nsqIdentifyAnswer{}, publishers.Wrap(publishers.ErrUnavailable, err)
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	ans, err := identify(conn, tc != nil)
	if err == nil && tc != nil {
		conn, err = nsqUpgrade(ctx, conn, addr, tc, ans.TLSv1)
	}
	if err == nil && ans.AuthRequired {
		err = nsqAuth(conn, addr, secret)
	}
	if err != nil {
		conn.Close()
		if errors.Is(err, publishers.ErrUnavailable) {
			return nil, nsqIdentifyAnswer{}, err
		}
		return nil, nsqIdentifyAnswer{}, publishers.Wrap(publishers.ErrUnavailable, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, ans, nil
}

// nsqUpgrade continues the connection over TLS as nsqd does after an IDENTIFY with tls_v1: the handshake,
// then an OK frame over TLS. offered is the tls_v1 of nsqd's answer: false when it has no certificate.
func nsqUpgrade(ctx context.Context, conn net.Conn, addr string, tc *tls.Config, offered bool) (net.Conn, error) {
	if !offered {
		return conn, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nsq.tls: nsqd %s does not offer TLS (started without --tls-cert and --tls-key)", addr))
	}
	tlsConn, err := publishers.StartTLS(ctx, conn, tc, addr)
	if err != nil {
		return conn, err
	}
	frameType, data, err := readNSQFrame(tlsConn)
	switch {
	case err != nil:
		return tlsConn, err
	case frameType == nsq.FrameTypeError:
		return tlsConn, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("TLS upgrade answered %q", data))
	case frameType != nsq.FrameTypeResponse || string(data) != "OK":
		return tlsConn, publishers.ProtocolError("nsqd answered the TLS upgrade with frame type %d %s", frameType, publishers.Truncate(data))
	}
	return tlsConn, nil
}

// nsqAuth sends AUTH with secret to nsqd at addr, which requires it, and reads the answer: JSON naming
// the identity and how many authorizations it has, or an error (E_AUTH_FAILED, E_UNAUTHORIZED: no
// authorizations) after which nsqd closes the connection.
func nsqAuth(conn net.Conn, addr, secret string) error {
	if secret == "" {
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nsqd %s requires AUTH (--auth-http-address): set nsq.auth_secret", addr))
	}
	cmd, err := nsq.Auth(secret)
	if err != nil {
		return err
	}
	if _, err := cmd.WriteTo(conn); err != nil {
		return err
	}
	frameType, data, err := readNSQFrame(conn)
	switch {
	case err != nil:
		return err
	case frameType == nsq.FrameTypeError:
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nsqd %s refused AUTH with nsq.auth_secret: %s", addr, publishers.Truncate(data)))
	case frameType != nsq.FrameTypeResponse:
		return publishers.ProtocolError("nsqd answered AUTH with frame type %d", frameType)
	}
	var answer struct {
		PermissionCount *int `json:"permission_count"`
	}
	if err := json.Unmarshal(data, &answer); err != nil || answer.PermissionCount == nil {
		return publishers.ProtocolError("AUTH answer %s is not nsqd's JSON (permission_count)", publishers.Truncate(data))
	}
	return nil
}

// errNSQTLSRequired: nsqd refused a command because the connection is not TLS (--tls-required).
var errNSQTLSRequired = errors.New("nsqd requires TLS")

// nsqIdentifyAnswer is what the handshake uses of nsqd's IDENTIFY answer.
type nsqIdentifyAnswer struct {
	MaxMsgSize   int64  `json:"max_msg_size"`
	TLSv1        bool   `json:"tls_v1"`
	AuthRequired bool   `json:"auth_required"`
	Version      string `json:"version"`
}

func identify(conn net.Conn, wantTLS bool) (nsqIdentifyAnswer, error) {
	var answer nsqIdentifyAnswer
	cmd, err := nsq.Identify(map[string]interface{}{"client_id": "mqtarget", "user_agent": "mqtarget", "feature_negotiation": true, "tls_v1": wantTLS})
	if err != nil {
		return answer, err
	}
	var buf bytes.Buffer
	buf.Write(nsq.MagicV2)
	if _, err = cmd.WriteTo(&buf); err != nil {
		return answer, err
	}
	if _, err = conn.Write(buf.Bytes()); err != nil {
		return answer, err
	}
	frameType, data, err := readNSQFrame(conn)
	switch {
	case err != nil:
		return answer, err
	case frameType == nsq.FrameTypeError:
		return answer, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("IDENTIFY refused: %s", publishers.Truncate(data)))
	case frameType != nsq.FrameTypeResponse:
		return answer, publishers.ProtocolError("nsqd answered IDENTIFY with frame type %d", frameType)
	case string(data) == "OK": // nsqd without feature negotiation
		return answer, nil
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return answer, publishers.ProtocolError("IDENTIFY answer %s is neither OK nor JSON: %v", publishers.Truncate(data), err)
	}
	return answer, nil
}

// nsqSizes remembers each nsqd's message size limit as probed, so that a flapping nsqd is not probed
// (one more connection) per dial: an answer, or a failed probe, is reused for nsqProbeEvery, and a
// failed dial forgets it, so an nsqd back from an outage or restarted with another limit is probed
// again.
type nsqSizes struct {
	mu sync.Mutex
	m  map[string]nsqSize // by address: bounded by nsq.hosts
}

type nsqSize struct {
	limit int64     // 0: the probe failed
	at    time.Time // when it was probed
}

func (s *nsqSizes) get(addr string, now time.Time) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[addr]
	return e.limit, ok && now.Sub(e.at) < nsqProbeEvery
}

func (s *nsqSizes) put(addr string, limit int64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]nsqSize{}
	}
	s.m[addr] = nsqSize{limit, now}
}

func (s *nsqSizes) forget(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, addr)
}

// maxMsgSize is nsqd's message size limit, probed at most once a minute per host (nsqSizes); 0 when
// unknown.
func (p *Publisher) maxMsgSize(ctx context.Context, addr string) (int64, error) {
	if limit, ok := p.sizes.get(addr, time.Now()); ok {
		return limit, nil
	}
	limit, err := p.probeMaxMsgSize(ctx, addr)
	switch {
	case errors.Is(err, errNSQTLSRequired): // fails the dial: no answer to keep
	case err == nil:
		p.sizes.put(addr, limit, time.Now())
	case ctx.Err() == nil: // a dial stopped by Close says nothing about nsqd
		p.sizes.put(addr, 0, time.Now())
	}
	return limit, err
}

// probeMaxMsgSize learns nsqd's --max-msg-size on a connection of its own: nsqd checks a PUB's announced
// size before reading the body or creating the topic, and its error names the limit
// ("E_BAD_MESSAGE PUB message too big 2147483647 > 1048576"), then closes that connection. nsqd logs the
// refusal once per probe (nsqSizes: about once per host and minute while connections are made).
func (p *Publisher) probeMaxMsgSize(ctx context.Context, addr string) (int64, error) {
	conn, _, err := p.handshake(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, p.dial)
	defer cancel()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	b := append([]byte("PUB "+nsqProbeTopic+"\n"), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[len(b)-4:], nsqProbeBodyLen)
	if _, err := conn.Write(b); err != nil {
		return 0, err
	}
	frameType, data, err := readNSQFrame(conn)
	if err != nil {
		return 0, err
	}
	var limit int64
	if frameType == nsq.FrameTypeError && bytes.Contains(data, []byte("TLS required")) {
		return 0, fmt.Errorf("%w (it answered %q)", errNSQTLSRequired, data)
	}
	if frameType != nsq.FrameTypeError {
		// No nsqd accepts a 2 GiB message, let alone before its body arrived.
		err := publishers.ProtocolError("nsqd answered a PUB of %d bytes, body not sent, with frame type %d %s", nsqProbeBodyLen, frameType, publishers.Truncate(data))
		p.proto.Count(addr, err)
		return 0, err
	}
	i := bytes.LastIndex(data, []byte(" > "))
	if i < 0 {
		return 0, fmt.Errorf("size probe answered %q", data)
	}
	if limit, err = strconv.ParseInt(string(data[i+3:]), 10, 64); err != nil || limit <= 0 {
		return 0, fmt.Errorf("size probe answered %q", data)
	}
	return limit, nil
}

var nop = []byte("NOP\n")

// nsqMaxAnswer bounds the data of a frame nsqd sends a producer ("OK", "_heartbeat_", an error text,
// the IDENTIFY JSON): a bigger size is not nsqd talking, and go-nsq's reader would allocate whatever
// the 4-byte size says (up to 2 GiB).
const nsqMaxAnswer = 4 << 10

// errNSQFrame: nsqd sent something that is not a frame within our limits: a protocol violation.
var errNSQFrame = fmt.Errorf("%w: malformed nsqd frame", wire.ErrProtocol)

// nsqFrameLen checks a frame header (size, type) and returns the length of the data that follows.
func nsqFrameLen(hdr []byte) (int, int32, error) {
	size := binary.BigEndian.Uint32(hdr)
	frameType := int32(binary.BigEndian.Uint32(hdr[4:]))
	if size < 4 || size-4 > nsqMaxAnswer {
		return 0, 0, fmt.Errorf("%w: size %d (at most %d)", errNSQFrame, size, nsqMaxAnswer+4)
	}
	return int(size - 4), frameType, nil
}

// readNSQFrame reads one frame from an unbuffered connection (the handshake), reading no byte past it.
func readNSQFrame(r io.Reader) (int32, []byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n, frameType, err := nsqFrameLen(hdr[:])
	if err != nil {
		return 0, nil, err
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, publishers.NoEOF(err)
	}
	return frameType, data, nil
}

// readNSQAnswer reads one frame: OK answers the oldest command, an error rejects it and ends the
// connection, a heart-beat wants a NOP; any other frame is a protocol violation (nsqd answers PUB and
// MPUB with OK and nothing else). It allocates nothing: the frame is read within r's buffer.
func readNSQAnswer(r *bufio.Reader) (wire.Answer, error) {
	hdr, err := r.Peek(8)
	if err != nil {
		if len(hdr) > 0 {
			err = publishers.NoEOF(err)
		}
		return wire.Answer{}, err
	}
	n, frameType, err := nsqFrameLen(hdr)
	if err != nil {
		return wire.Answer{}, err
	}
	if 8+n > r.Size() {
		return wire.Answer{}, fmt.Errorf("%w: %d bytes do not fit the %d-byte read buffer", errNSQFrame, 8+n, r.Size())
	}
	frame, err := r.Peek(8 + n)
	if err != nil {
		return wire.Answer{}, publishers.NoEOF(err)
	}
	defer r.Discard(8 + n) // Peek succeeded, so Discard does too
	data := frame[8:]
	switch {
	case frameType == nsq.FrameTypeResponse && string(data) == "_heartbeat_":
		return wire.Answer{Reply: nop}, nil
	case frameType == nsq.FrameTypeResponse && string(data) == "OK":
		return wire.Answer{Kind: wire.Next}, nil
	case frameType == nsq.FrameTypeResponse:
		return wire.Answer{}, fmt.Errorf("%w: response %s where only OK answers a publish", errNSQFrame, publishers.Truncate(data))
	case frameType == nsq.FrameTypeError:
		// Every error nsqd answers a producer command with is fatal: it closes the connection.
		reason := string(data)
		return wire.Answer{Kind: wire.Next, Err: publishers.Wrap(publishers.ErrRejected, nsq.ErrProtocol{Reason: reason}),
			Close: publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nsqd closed the connection after %s", reason))}, nil
	default:
		return wire.Answer{}, fmt.Errorf("%w: frame type %d on a producer connection", errNSQFrame, frameType)
	}
}

// appendPUB encodes "PUB <topic>\n" <size> <body>.
func appendPUB(b []byte, topic string, body []byte) []byte {
	b = append(b, "PUB "...)
	b = append(b, topic...)
	b = append(b, '\n')
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// appendMPUB encodes "MPUB <topic>\n" <size> <count> (<size> <body>)*.
func appendMPUB(b []byte, topic string, bodies [][]byte) []byte {
	size := 4
	for _, body := range bodies {
		size += 4 + len(body)
	}
	b = append(b, "MPUB "...)
	b = append(b, topic...)
	b = append(b, '\n')
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, uint32(len(bodies)))
	for _, body := range bodies {
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	return b
}
