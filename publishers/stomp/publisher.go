package stomp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// Config configures the STOMP publisher.
type Config struct {
	// Hosts are STOMP broker addresses (host:port). Empty means: start embedded go-stomp servers.
	Hosts []string `yaml:"hosts" help:"STOMP broker addresses host:port, comma-separated; empty starts embedded go-stomp servers"`
	// Login and Passcode go into CONNECT; empty Login sends neither.
	Login    string            `yaml:"login" help:"STOMP login (empty: connect without credentials)"`
	Passcode publishers.Secret `yaml:"passcode" help:"STOMP passcode (never printed)"`
	// VHost is CONNECT's host header; empty uses the host part of the broker address. RabbitMQ wants "/".
	VHost string `yaml:"vhost" help:"STOMP virtual host (CONNECT host header; RabbitMQ: /); empty uses the address's host"`
	// Prefix is put before every topic to make the destination, e.g. /queue/ or /topic/.
	Prefix string `yaml:"prefix" help:"destination prefix put before every topic: /queue/ (point-to-point) or /topic/ (publish-subscribe)"`
	// Persistent adds persistent:true to every SEND, so brokers store the messages durably.
	Persistent bool `yaml:"persistent" help:"send messages with persistent:true (stored durably by the broker)"`
	// ConnectionsPerHost is the number of STOMP connections per host. Requests are pipelined on each and
	// gathered into few writes; more than one spreads the broker's per-connection work.
	ConnectionsPerHost int `yaml:"connections_per_host" help:"STOMP connections per broker host"`
	// HeartBeat is how often mqtarget offers to send heart-beats; 0 sends none.
	HeartBeat time.Duration `yaml:"heartbeat" help:"client heart-beat send interval offered in CONNECT (0: none; Artemis drops connections idle 60s without)"`
	// HeartBeatReceive is the broker heart-beat interval mqtarget asks for; 0 asks for none.
	HeartBeatReceive time.Duration `yaml:"heartbeat_receive" help:"broker heart-beat interval asked for in CONNECT (0: none)"`
	// HeartBeatGrace: a connection is considered dead after this many broker heart-beat intervals of
	// silence. ActiveMQ Classic sends its first heart-beat late, so 1 would drop idle connections.
	HeartBeatGrace int `yaml:"heartbeat_grace" help:"multiplier on the broker heart-beat interval before an idle connection counts as dead"`
	// DialTimeout bounds connecting and the CONNECT/CONNECTED exchange; a request's publish timeout bounds
	// the dial it waits for as well.
	DialTimeout time.Duration `yaml:"dial_timeout" help:"timeout for connecting to a STOMP broker, CONNECT included (publish_timeout bounds it too)"`
	// Embedded is the number of in-process go-stomp servers started when Hosts is empty.
	Embedded int `yaml:"embedded" help:"number of in-process go-stomp servers started when stomp.hosts is empty"`
	// EmbeddedMaxBytes bounds the messages an embedded server keeps queued; beyond it the oldest go.
	EmbeddedMaxBytes int64 `yaml:"embedded_max_bytes" help:"bytes of queued messages each embedded go-stomp server keeps; beyond it the oldest are dropped"`
	// TLS: STOMP over TLS from the first byte, for publishing and consuming alike.
	publishers.TLSConfig `yaml:",inline"`
}

// DefaultConfig returns the STOMP defaults.
func DefaultConfig() Config {
	return Config{
		Prefix:             "/queue/",
		ConnectionsPerHost: 2,
		HeartBeat:          10 * time.Second,
		HeartBeatGrace:     3,
		DialTimeout:        time.Second,
		Embedded:           3,
		EmbeddedMaxBytes:   64 << 20,
	}
}

// maxHeartBeat bounds the heart-beat settings: STOMP carries them in milliseconds, and beyond an hour
// a heart-beat detects nothing.
const maxHeartBeat = time.Hour

// Validate checks c; errors name the field under prefix (e.g. "stomp").
func (c Config) Validate(prefix string) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{prefix, field}, args...)...))
	}
	errs = append(errs, publishers.ValidateAddrs(prefix+".hosts", c.Hosts))
	if c.Login == "" && c.Passcode != "" {
		add("passcode", "set without stomp.login")
	} else if checkHeaderText(string(c.Passcode)) != nil {
		add("passcode", "must be valid UTF-8 without control characters, ':' or '\\' (CONNECT's header carries it)") // the value is secret
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") {
		add("prefix", "must start and end with / (like /queue/ or /topic/), got %q", c.Prefix)
	} else if err := checkHeaderText(c.Prefix); err != nil {
		add("prefix", "%v", err)
	}
	if err := checkHeaderText(c.VHost); err != nil {
		add("vhost", "%v", err)
	}
	if err := checkHeaderText(c.Login); err != nil {
		add("login", "%v", err)
	}
	if c.ConnectionsPerHost < 1 || c.ConnectionsPerHost > 64 {
		add("connections_per_host", "must be 1..64, got %d", c.ConnectionsPerHost)
	}
	if c.HeartBeat < 0 || c.HeartBeat > maxHeartBeat || c.HeartBeat%time.Millisecond != 0 {
		add("heartbeat", "must be 0 or a whole number of milliseconds up to %v, got %v", maxHeartBeat, c.HeartBeat)
	}
	if c.HeartBeatReceive < 0 || c.HeartBeatReceive > maxHeartBeat || c.HeartBeatReceive%time.Millisecond != 0 {
		add("heartbeat_receive", "must be 0 or a whole number of milliseconds up to %v, got %v", maxHeartBeat, c.HeartBeatReceive)
	}
	if c.HeartBeatGrace < 1 || c.HeartBeatGrace > 100 {
		add("heartbeat_grace", "must be 1..100, got %d", c.HeartBeatGrace)
	}
	if c.DialTimeout <= 0 || c.DialTimeout > publishers.MaxDialTimeout {
		add("dial_timeout", "must be 1ns..%v, got %v", publishers.MaxDialTimeout, c.DialTimeout)
	}
	if len(c.Hosts) == 0 && (c.Embedded < 1 || c.Embedded > 16) {
		add("embedded", "must be 1..16 when %s.hosts is empty, got %d", prefix, c.Embedded)
	}
	if len(c.Hosts) == 0 && (c.EmbeddedMaxBytes < 1<<20 || c.EmbeddedMaxBytes > publishers.MaxEmbeddedBytes) {
		add("embedded_max_bytes", "must be 1048576 (1 MiB)..%d (1 TiB) when %s.hosts is empty, got %d", int64(publishers.MaxEmbeddedBytes), prefix, c.EmbeddedMaxBytes)
	}
	if c.TLSConfig.Enabled && len(c.Hosts) == 0 {
		add("tls", "needs %s.hosts (embedded go-stomp servers run without TLS)", prefix)
	}
	errs = append(errs, c.TLSConfig.Validate(prefix))
	return errors.Join(errs...)
}

// checkHeaderText rejects what cannot travel in a STOMP header the same way in STOMP 1.0, 1.1 and 1.2:
// invalid UTF-8, control characters, and ':' and '\' (escaped differently, or not at all, by version).
func checkHeaderText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == ':' || r == '\\' {
			return fmt.Errorf("%q contains %q (control characters, ':' and '\\' are not allowed)", s, r)
		}
	}
	return nil
}

// Publisher publishes to one or more STOMP 1.2 brokers (ActiveMQ Artemis, ActiveMQ Classic, RabbitMQ, the
// embedded go-stomp server).
//
// It speaks the client side of the protocol itself: SEND, BEGIN and COMMIT are encoded here, CONNECT
// with go-stomp's frame package, and the broker's frames are read by readSTOMPFrame (go-stomp's
// frame.Reader trusts content-length and line lengths). go-stomp's Conn cannot be used for a load target: Conn.Send with a receipt holds the
// connection's lock until the receipt arrives (one message per round trip per connection), it has no
// non-blocking way to wait for a receipt (async would need a goroutine per message), it takes no
// context, and when a receipt waiter has given up its read loop blocks forever delivering to it.
//
// Here every SEND carries a receipt header whose id is the request's sequence number on the connection
// and a tag keyed by a random per-connection seed (a broker cannot name the receipt of a SEND it did not
// get, not even the next one's), and is queued on the shared connection core (publishers/wire), which writes many requests at once and
// runs each callback when its RECEIPT (or an ERROR) arrives. Sync publishes wait for their callback or
// their context; PublishAsync returns once queued.
type Publisher struct {
	cfg      Config
	tls      *tls.Config // nil: plain TCP
	pool     *publishers.Pool[*stompConn]
	log      *slog.Logger
	versions publishers.Versions  // what each broker said it runs (CONNECTED's server header)
	pings    publishers.PingLimit // Ping's connections: one per host and pingReuse
	proto    *publishers.ProtocolErrors
	refused  []publishers.Refusals // per host: destinations refused for want of permission (refusals.go)
}

// Timings of the connection handling.
const (
	// stompReceiptTimeout bounds requests without a deadline (async publishes): their done runs within
	// it, the stall grace included.
	stompReceiptTimeout = 30 * time.Second
	stompStallGrace     = time.Second // how far past its deadline the oldest receipt may be late
	stompCloseWait      = time.Second // how long Close waits for the receipts of SENDs written
)

// New creates the publisher. It does not connect: connections are made on first use and again
// after one breaks, so mqtarget recovers when a broker comes back.
func New(c Config, log *slog.Logger) (*Publisher, error) {
	if err := c.Validate("stomp"); err != nil {
		return nil, err
	}
	if len(c.Hosts) == 0 {
		return nil, errors.New("stomp.hosts: at least one host is required")
	}
	tc, err := c.TLSConfig.Client("stomp")
	if err != nil {
		return nil, err
	}
	log = publishers.LimitLog(log) // a failing broker must not flood the log (lograte)
	p := &Publisher{cfg: c, tls: tc, log: log, proto: publishers.NewProtocolErrors("stomp", c.Hosts, log), refused: make([]publishers.Refusals, len(c.Hosts))}
	p.pool = publishers.NewPool("stomp", c.Hosts, c.ConnectionsPerHost, func(ctx context.Context, addr string) (*stompConn, error) {
		netConn, hb, server, err := p.handshake(ctx, addr)
		if err != nil {
			return nil, err
		}
		c := newSTOMPConn(netConn, addr, hb, p)
		c.txNotStored = commitNotStored(server)
		return c, nil
	})
	p.pool.Log = log
	return p, nil
}

// Hosts implements Publisher.
func (p *Publisher) Hosts() []string { return p.pool.Addrs }

// MaxTopicLen is the longest topic (destination name without the prefix) accepted, in bytes.
const MaxTopicLen = 255

// ValidateTopic accepts 1-255 bytes of UTF-8 without control characters, ':' or '\', not starting with
// '/' (the prefix supplies the destination type) and without whitespace at either end.
func (p *Publisher) ValidateTopic(name string) error { return validateSTOMPTopic(name) }

func validateSTOMPTopic(name string) error {
	switch {
	case name == "":
		return errors.New("topic must not be empty")
	case len(name) > MaxTopicLen:
		return fmt.Errorf("topic is %d bytes, at most %d are allowed", len(name), MaxTopicLen)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("%q starts with '/': give the name only, stomp.prefix supplies /queue/ or /topic/", name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%q starts or ends with whitespace", name)
	}
	if err := checkHeaderText(name); err != nil {
		return fmt.Errorf("not a valid STOMP destination name: %w", err)
	}
	return nil
}

// Publish implements Publisher with one SEND carrying a receipt header.
func (p *Publisher) Publish(ctx context.Context, host int, topic string, body []byte) error {
	if err := p.refusedBefore(host, topic); err != nil {
		return err
	}
	err := publishers.Await(ctx, func(done func(error)) error { return p.send(ctx, host, topic, body, nil, done) })
	p.noteRefusal(host, topic, err)
	return err
}

// PublishBatch implements Publisher with a transaction: BEGIN, one SEND per body, COMMIT with a receipt,
// all queued at once. The broker acknowledges the commit once every message is in; RabbitMQ, which
// answers COMMIT before that (commitNotStored), gets one SEND with a receipt per body instead.
func (p *Publisher) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if err := p.refusedBefore(host, topic); err != nil {
		return err
	}
	err := publishers.Await(ctx, func(done func(error)) error { return p.send(ctx, host, topic, nil, bodies, done) })
	p.noteRefusal(host, topic, err)
	return err
}

// PublishAsync implements Publisher: it queues a SEND with a receipt header and returns; done runs on
// the connection's read loop when the receipt arrives (or the connection fails), so it must be quick.
// While host's connection is being made the publish waits for it on the pool's goroutine.
func (p *Publisher) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	if err := p.refusedBefore(host, topic); err != nil {
		return err
	}
	caller := done
	done = func(err error) { p.noteRefusal(host, topic, err); caller(err) }
	if conn, ok := p.pool.Ready(host); ok {
		return p.sendOn(conn, time.Time{}, topic, body, nil, done)
	}
	return p.pool.GetAsync(host, func(conn *stompConn) error {
		return p.sendOn(conn, time.Time{}, topic, body, nil, done)
	}, done)
}

// send queues a SEND of body, or a transaction of bodies when body is nil, on a connection to host.
func (p *Publisher) send(ctx context.Context, host int, topic string, body []byte, bodies [][]byte, done func(error)) error {
	conn, err := p.pool.Get(ctx, host)
	if err != nil {
		return err
	}
	by, _ := ctx.Deadline()
	return p.sendOn(conn, by, topic, body, bodies, done)
}

// sendOn is send on conn, the command dropped unwritten after by (zero: never). The receipt id is the
// command's sequence number on its connection, tagged (stompReceipts).
func (p *Publisher) sendOn(conn *stompConn, by time.Time, topic string, body []byte, bodies [][]byte, done func(error)) error {
	var err error
	dest := p.cfg.Prefix + topic
	persistent := p.cfg.Persistent
	rc := conn.receipts
	switch {
	case bodies == nil:
		err = conn.Send(by, func(b []byte, id uint64) []byte {
			return appendSEND(b, dest, body, persistent, 0, rc, id)
		}, done)
	case conn.txNotStored:
		// Acknowledged together, not atomic: done runs once every SEND's receipt (or the first
		// failure's) is in; those queued before a refusal may be stored.
		all := publishers.Together(len(bodies), done)
		for i, body := range bodies {
			err = conn.Send(by, func(b []byte, id uint64) []byte {
				return appendSEND(b, dest, body, persistent, 0, rc, id)
			}, all)
			if err != nil && i == 0 {
				break // nothing queued: refused as a whole, done never runs
			}
			if err != nil {
				for range len(bodies) - i { // those never queued fail; the others answer as they come
					all(publishers.SendRefused(p.pool.Closed(), err))
				}
				return nil
			}
		}
	default:
		err = conn.Send(by, func(b []byte, id uint64) []byte {
			b = appendTxFrame(b, "BEGIN", id, rc, 0)
			for _, body := range bodies {
				b = appendSEND(b, dest, body, persistent, id, rc, 0)
			}
			return appendTxFrame(b, "COMMIT", id, rc, id)
		}, done)
	}
	return publishers.SendRefused(p.pool.Closed(), err)
}

// appendSEND encodes a SEND; tx and receipt are left out when 0; rc makes the receipt id.
func appendSEND(b []byte, dest string, body []byte, persistent bool, tx uint64, rc stompReceipts, receipt uint64) []byte {
	b = append(b, "SEND\ndestination:"...)
	b = appendHeaderValue(b, dest)
	b = append(b, "\ncontent-length:"...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, '\n')
	if persistent {
		b = append(b, "persistent:true\n"...)
	}
	b = appendIDHeader(b, "transaction:tx-", tx)
	b = rc.appendHeader(b, receipt)
	b = append(b, '\n')
	b = append(b, body...)
	return append(b, 0)
}

// appendHeaderValue appends s escaped as STOMP 1.2 wants: a topic reaches here unvalidated when
// Publish is called directly, and an unescaped newline would inject a header, an unescaped ':' be read
// differently (Artemis 2.40 acknowledges a SEND to /queue/a:: unescaped and refuses it escaped).
func appendHeaderValue(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\\:\n\r") { // validated names: nothing to escape
		return append(b, s...)
	}
	for i := range len(s) {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case ':':
			b = append(b, '\\', 'c')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendTxFrame encodes BEGIN or COMMIT of transaction tx-<tx>, with a receipt unless receipt is 0.
func appendTxFrame(b []byte, command string, tx uint64, rc stompReceipts, receipt uint64) []byte {
	b = append(b, command...)
	b = append(b, '\n')
	b = appendIDHeader(b, "transaction:tx-", tx)
	b = rc.appendHeader(b, receipt)
	return append(b, '\n', 0)
}

// stompReceipts makes and checks one connection's receipt ids, <seq>-<tag>: tag is a hash of seq keyed by
// a random seed, so no broker (nor anything else on the path) can name the receipt of a SEND it did not
// get, not even the next one's, and a receipt id that is not ours is told from ours.
type stompReceipts struct{ seed maphash.Seed }

func newSTOMPReceipts() stompReceipts { return stompReceipts{seed: maphash.MakeSeed()} }

// appendHeader appends the header line receipt:<id>, or nothing when seq is 0.
func (rc stompReceipts) appendHeader(b []byte, seq uint64) []byte {
	if seq == 0 {
		return b
	}
	b = append(b, "receipt:"...)
	b = rc.appendID(b, seq)
	return append(b, '\n')
}

// appendID appends the receipt id of seq.
func (rc stompReceipts) appendID(b []byte, seq uint64) []byte {
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, '-')
	var tag [8]byte
	binary.BigEndian.PutUint64(tag[:], maphash.Comparable(rc.seed, seq))
	return hex.AppendEncode(b, tag[:])
}

// parse returns the sequence number of a receipt id this connection made, or a protocol violation.
func (rc stompReceipts) parse(id string) (uint64, error) {
	s, _, _ := strings.Cut(id, "-")
	seq, err := strconv.ParseUint(s, 10, 64)
	var want [48]byte
	if err != nil || seq == 0 || string(rc.appendID(want[:0], seq)) != id {
		return 0, publishers.ProtocolError("receipt id %s is none this connection sent", publishers.Truncate([]byte(id)))
	}
	return seq, nil
}

// appendIDHeader appends the header line prefix<id>, or nothing when id is 0.
func appendIDHeader(b []byte, prefix string, id uint64) []byte {
	if id == 0 {
		return b
	}
	b = append(b, prefix...)
	b = strconv.AppendUint(b, id, 10)
	return append(b, '\n')
}

// Ping connects to host (CONNECT answered by CONNECTED) on a connection of its own, so a check never
// queues behind publishes.
func (p *Publisher) Ping(ctx context.Context, host int) error {
	if err := p.pool.CheckHost(host); err != nil {
		return err
	}
	return p.pings.Do(ctx, host, p.pool.Events, p.ping)
}

func (p *Publisher) ping(ctx context.Context, host int) error {
	conn, _, _, err := p.handshake(ctx, p.pool.Addrs[host])
	if err != nil {
		return err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	_ = frame.NewWriter(conn).Write(frame.New(frame.DISCONNECT))
	return conn.Close()
}

// heartBeats are the negotiated intervals: send is how often we must write, recv how often the broker
// will (0: never).
type heartBeats struct{ send, recv time.Duration }

// handshake dials addr and exchanges CONNECT/CONNECTED within ctx and the dial timeout.
func (p *Publisher) handshake(ctx context.Context, addr string) (net.Conn, heartBeats, string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	conn, err := dialSTOMP(ctx, addr, p.tls)
	if err != nil {
		return nil, heartBeats{}, "", err
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	stop := interruptible(ctx, conn)
	hb, server, err := p.connect(conn, addr)
	if !stop() && err == nil {
		err = errors.New("connected as the dial ended") // the interruption may have reached the socket
	}
	if err != nil {
		conn.Close()
		if publishers.IsProtocolError(err) {
			p.proto.Count(addr, err)
		}
		if errors.Is(err, publishers.ErrUnavailable) { // a refused CONNECT: the broker's answer, as it gave it
			return nil, hb, "", err
		}
		return nil, hb, "", publishers.Wrap(publishers.ErrUnavailable, noAnswer(ctx, err))
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, hb, server, nil
}

// interruptible makes ctx's end interrupt what waits on conn: its deadline alone ignores cancellation,
// and the pool's Close (or a consumer's) cancels the dials in progress and waits for them, which would
// otherwise take up to dial_timeout. stop undoes it, reporting false when ctx ended first.
func interruptible(ctx context.Context, conn net.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

// noAnswer names why a handshake on a connection got no answer: ctx's end (a Close's cancellation, or
// the dial timeout), else the socket's own error.
func noAnswer(ctx context.Context, err error) error {
	if !publishers.Ended(ctx) {
		return err
	}
	cause := ctx.Err()
	if cause == nil { // the socket deadline fired a moment before ctx's timer
		cause = context.DeadlineExceeded
	}
	return fmt.Errorf("no CONNECTED in time: %w (%v)", cause, err)
}

// dialSTOMP connects to addr within ctx, over TLS with tc when it is not nil.
func dialSTOMP(ctx context.Context, addr string, tc *tls.Config) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, publishers.Wrap(publishers.ErrUnavailable, err)
	}
	if tc == nil {
		return conn, nil
	}
	tlsConn, err := publishers.StartTLS(ctx, conn, tc, addr)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return tlsConn, nil
}

// connect writes CONNECT and reads the answer: the heart-beats agreed and the broker's server header.
func (p *Publisher) connect(conn net.Conn, addr string) (heartBeats, string, error) {
	if err := frame.NewWriter(conn).Write(p.connectFrame(addr)); err != nil {
		return heartBeats{}, "", err
	}
	r := bufio.NewReaderSize(conn, 4096)
	var f *frame.Frame
	for f == nil { // skip heart-beats, should a broker send one first
		var err error
		if f, err = readSTOMPFrame(r); err != nil {
			return heartBeats{}, "", err
		}
	}
	switch f.Command {
	case frame.CONNECTED:
		// What followed CONNECTED in the same read would be lost with r: heart-beats may, anything else
		// (a RECEIPT before any SEND) is no answer to us.
		if rest, _ := r.Peek(r.Buffered()); len(bytes.Trim(rest, "\r\n")) > 0 {
			return heartBeats{}, "", publishers.ProtocolError("CONNECTED followed by %s before any command", publishers.Truncate(rest))
		}
		p.versions.Set(addr, f.Header.Get(frame.Server))
	case frame.ERROR:
		return heartBeats{}, "", connectRefused(f)
	default:
		return heartBeats{}, "", publishers.ProtocolError("CONNECT answered with %s", f.Command)
	}
	hb, err := negotiate(p.cfg.HeartBeat, p.cfg.HeartBeatReceive, f.Header.Get(frame.HeartBeat))
	return hb, f.Header.Get(frame.Server), err
}

func (p *Publisher) connectFrame(addr string) *frame.Frame {
	vhost := p.cfg.VHost
	if vhost == "" {
		vhost, _, _ = net.SplitHostPort(addr)
	}
	f := frame.New(frame.CONNECT,
		frame.AcceptVersion, "1.2",
		frame.Host, vhost,
		frame.HeartBeat, fmt.Sprintf("%d,%d", p.cfg.HeartBeat.Milliseconds(), p.cfg.HeartBeatReceive.Milliseconds()))
	if p.cfg.Login != "" {
		f.Header.Add(frame.Login, p.cfg.Login)
		f.Header.Add(frame.Passcode, string(p.cfg.Passcode))
	}
	return f
}

// connectRefused is the error for an ERROR answering CONNECT (a wrong login, an unknown virtual host):
// ErrUnavailable (503), like every broker's refused connection, since no message can go through it;
// ErrRejected (502) is a message's own refusal.
func connectRefused(f *frame.Frame) error {
	return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("CONNECT refused: %s", errorText(f)))
}

// negotiate applies the STOMP heart-beat rules to our offer (send, recv) and the broker's header
// "sx,sy": we send every max(send, sy) when both are non-zero, the broker every max(recv, sx).
func negotiate(send, recv time.Duration, header string) (heartBeats, error) {
	if header == "" {
		return heartBeats{}, nil
	}
	sx, sy, err := frame.ParseHeartBeat(header)
	if err != nil {
		return heartBeats{}, publishers.ProtocolError("CONNECTED heart-beat %s: %v", publishers.Truncate([]byte(header)), err)
	}
	var hb heartBeats
	if send > 0 && sy > 0 {
		hb.send = max(send, sy)
	}
	if recv > 0 && sx > 0 {
		hb.recv = max(recv, sx)
	}
	return hb, nil
}

// errorText is what an ERROR frame says: its message header, then its body when short and different.
func errorText(f *frame.Frame) string {
	msg := f.Header.Get(frame.Message)
	// Artemis repeats the message header in the body, punctuated differently ("AMQ229032 User x …" and
	// "AMQ229032: User: x …"): said once.
	if body := strings.TrimSpace(string(f.Body)); body != "" && len(body) < 512 && letters(body) != letters(msg) {
		msg += ": " + body
	}
	return msg
}

// letters is s with only its letters and digits, for comparing two wordings of one message.
func letters(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, s)
}

// Close closes every connection, failing what is still pending so every callback runs, and waits for
// the read loops. It is idempotent.
func (p *Publisher) Close() error {
	p.pool.Close()
	return nil
}

// stompConn is one publishing connection.
type stompConn struct {
	*wire.Conn
	publishers.AnswerMark
	receipts stompReceipts
	// txNotStored: the broker answers COMMIT before it stored the transaction's messages
	// (commitNotStored): a batch goes as SENDs each with its receipt
	txNotStored bool
}

// commitNotStored reports whether the broker that introduced itself as server answers a COMMIT's
// receipt before it stored what the transaction sent. RabbitMQ's STOMP adapter replays a
// transaction's SENDs at COMMIT and answers the COMMIT at once, without the publisher confirms its
// receipted SENDs wait for: a 200 for messages it then dropped (a queue the user may not use: the
// ERROR came 35 ms after the COMMIT's receipt, RabbitMQ 3.10.8), or never stored. Its receipt for a
// SEND waits for the confirm.
func commitNotStored(server string) bool {
	return strings.HasPrefix(server, "RabbitMQ/")
}

var (
	stompHeartBeat  = []byte{'\n'}
	stompDisconnect = []byte("DISCONNECT\n\n\x00")
)

func newSTOMPConn(conn net.Conn, addr string, hb heartBeats, p *Publisher) *stompConn {
	rc := newSTOMPReceipts()
	read := func(r *bufio.Reader) (wire.Answer, error) { return readSTOMPAnswer(r, rc) }
	c := &stompConn{receipts: rc}
	c.Conn = wire.New(conn, wire.Config{
		Name:           "stomp",
		Read:           c.Marking(read),
		MaxWait:        stompReceiptTimeout - stompStallGrace,
		StallGrace:     stompStallGrace,
		IdleTimeout:    hb.recv * time.Duration(p.cfg.HeartBeatGrace),
		HeartBeat:      hb.send,
		HeartBeatFrame: stompHeartBeat,
		CloseWait:      stompCloseWait,
		Goodbye:        stompDisconnect,
		Unavailable:    publishers.ErrUnavailable,
		Closed:         publishers.ErrClosed,
		Timeout:        publishers.ErrTimeout,
		ProtocolError:  p.proto.Hook(addr),
		Log:            p.log,
	})
	return c
}

// readSTOMPAnswer reads one frame: a RECEIPT answers the request of its id; an ERROR ends the
// connection (the broker closes it): the request it names is rejected and the others outstanding are
// unavailable, and when it names none every request outstanding is rejected (the broker refused one of
// them, e.g. a SEND in a transaction). A receipt id rc did not make, or any other frame (a publishing
// connection subscribes to nothing), is a protocol violation.
func readSTOMPAnswer(r *bufio.Reader, rc stompReceipts) (wire.Answer, error) {
	f, err := readSTOMPFrame(r)
	switch {
	case err != nil:
		return wire.Answer{}, err
	case f == nil: // heart-beat
		return wire.Answer{}, nil
	}
	switch f.Command {
	case frame.RECEIPT:
		id, err := rc.parse(f.Header.Get(frame.ReceiptId))
		if err != nil {
			return wire.Answer{}, err
		}
		return wire.Answer{Kind: wire.ByID, ID: id}, nil
	case frame.ERROR:
		s, named := f.Header.Contains(frame.ReceiptId)
		rejected := publishers.Wrap(publishers.ErrRejected, &sendError{text: errorText(f), named: named})
		if named {
			id, err := rc.parse(s)
			if err != nil {
				return wire.Answer{}, err
			}
			return wire.Answer{Kind: wire.ByID, ID: id, Err: rejected,
				Close: publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("connection closed after a broker ERROR: %s", errorText(f)))}, nil
		}
		return wire.Answer{Close: rejected}, nil
	default:
		return wire.Answer{}, publishers.ProtocolError("%s frame on a publishing connection", f.Command)
	}
}

// Limits on a frame from the broker. A publishing connection gets CONNECTED, RECEIPT, ERROR and
// heart-beats, all short: anything bigger is not a broker answering us, and go-stomp's frame.Reader
// would allocate whatever content-length says (up to 4 GiB) and read lines of any length.
const (
	stompMaxBody    = 64 << 10
	stompMaxHeaders = 64
)

// errSTOMPFrame: the broker sent something that is not a STOMP frame within our limits: a protocol
// violation.
var errSTOMPFrame = fmt.Errorf("%w: malformed STOMP frame from the broker", wire.ErrProtocol)

// readSTOMPFrame reads one frame, or returns nil for a heart-beat. A line longer than r's buffer, more
// than stompMaxHeaders headers or a body over stompMaxBody is errSTOMPFrame, as is anything malformed;
// other errors are r's.
func readSTOMPFrame(r *bufio.Reader) (*frame.Frame, error) { return readSTOMPFrameMax(r, stompMaxBody) }

// readSTOMPFrameMax is readSTOMPFrame with bodies of up to maxBody bytes (a consumer's messages).
func readSTOMPFrameMax(r *bufio.Reader, maxBody int) (*frame.Frame, error) {
	line, err := readSTOMPLine(r)
	if err != nil || len(line) == 0 {
		return nil, err
	}
	f := frame.New(string(line))
	switch f.Command {
	case frame.CONNECTED, frame.RECEIPT, frame.ERROR, frame.MESSAGE:
	default:
		return nil, fmt.Errorf("%w: command %q", errSTOMPFrame, publishers.Truncate(line))
	}
	for {
		line, err := readSTOMPLine(r)
		switch {
		case err != nil:
			return nil, err
		case len(line) == 0:
			return f, readSTOMPBody(r, f, maxBody)
		case f.Header.Len() == stompMaxHeaders:
			return nil, fmt.Errorf("%w: more than %d headers", errSTOMPFrame, stompMaxHeaders)
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(name) == 0 {
			return nil, fmt.Errorf("%w: header line %q", errSTOMPFrame, publishers.Truncate(line))
		}
		if f.Command != frame.CONNECTED { // STOMP 1.2 escapes every header but CONNECT's and CONNECTED's
			if name, err = unescapeSTOMP(name); err == nil {
				value, err = unescapeSTOMP(value)
			}
			if err != nil {
				return nil, err
			}
		}
		f.Header.Add(string(name), string(value))
	}
}

// readSTOMPLine returns the next line without its LF or CRLF; valid until the next read from r.
func readSTOMPLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("%w: line longer than %d bytes", errSTOMPFrame, r.Size())
	case err != nil:
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readSTOMPBody reads f's body and the NUL ending the frame.
func readSTOMPBody(r *bufio.Reader, f *frame.Frame, maxBody int) error {
	if s, ok := f.Header.Contains(frame.ContentLength); ok {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil || n > uint64(maxBody) {
			return fmt.Errorf("%w: content-length %q (at most %d)", errSTOMPFrame, publishers.Truncate([]byte(s)), maxBody)
		}
		f.Body = make([]byte, n+1)
		if _, err := io.ReadFull(r, f.Body); err != nil {
			return publishers.NoEOF(err)
		}
		if f.Body[n] != 0 {
			return fmt.Errorf("%w: no NUL after the body", errSTOMPFrame)
		}
		f.Body = f.Body[:n]
		return nil
	}
	for {
		chunk, err := r.ReadSlice(0)
		if len(f.Body)+len(chunk) > maxBody+1 {
			return fmt.Errorf("%w: body over %d bytes", errSTOMPFrame, maxBody)
		}
		f.Body = append(f.Body, chunk...)
		switch {
		case err == nil:
			f.Body = f.Body[:len(f.Body)-1]
			return nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return publishers.NoEOF(err)
		}
	}
}

// unescapeSTOMP undoes STOMP 1.2 header escaping; an undefined escape is errSTOMPFrame.
func unescapeSTOMP(b []byte) ([]byte, error) {
	if bytes.IndexByte(b, '\\') < 0 {
		return b, nil
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		if i++; i == len(b) {
			return nil, fmt.Errorf("%w: header ends in a backslash", errSTOMPFrame)
		}
		switch b[i] {
		case '\\':
			out = append(out, '\\')
		case 'c':
			out = append(out, ':')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		default:
			return nil, fmt.Errorf("%w: undefined escape \\%c in a header", errSTOMPFrame, b[i])
		}
	}
	return out, nil
}
