package publishers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/nsqio/go-nsq"
)

// NSQConfig configures the NSQ publisher.
type NSQConfig struct {
	// Hosts are nsqd TCP addresses (host:port). Empty means: start embedded nsqd instances.
	Hosts []string `yaml:"hosts" help:"nsqd TCP addresses host:port, comma-separated; empty starts embedded nsqd"`
	// ProducersPerHost is the number of TCP connections per nsqd. Commands on one connection are
	// pipelined but written one at a time, so more than one lets concurrent writes overlap.
	ProducersPerHost int `yaml:"producers_per_host" help:"producer TCP connections per nsqd host"`
	// DialTimeout bounds connecting to nsqd; it must not exceed the publish timeout.
	DialTimeout time.Duration `yaml:"dial_timeout" help:"timeout for connecting to nsqd (at most publish_timeout)"`
	// Embedded is the number of in-process nsqd instances started when Hosts is empty.
	Embedded int `yaml:"embedded" help:"number of in-process nsqd instances started when nsq.hosts is empty"`
}

// DefaultNSQConfig returns the NSQ defaults.
func DefaultNSQConfig() NSQConfig {
	return NSQConfig{ProducersPerHost: 2, DialTimeout: time.Second, Embedded: 3}
}

// Validate checks c; errors name the field under prefix (e.g. "nsq").
func (c NSQConfig) Validate(prefix string) error {
	var errs []error
	for i, h := range c.Hosts {
		if err := validateHostPort(h); err != nil {
			errs = append(errs, fmt.Errorf("%s.hosts[%d]: %w", prefix, i, err))
		}
	}
	if c.ProducersPerHost < 1 || c.ProducersPerHost > 64 {
		errs = append(errs, fmt.Errorf("%s.producers_per_host: must be 1..64, got %d", prefix, c.ProducersPerHost))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s.dial_timeout: must be positive, got %v", prefix, c.DialTimeout))
	}
	if len(c.Hosts) == 0 && (c.Embedded < 1 || c.Embedded > 16) {
		errs = append(errs, fmt.Errorf("%s.embedded: must be 1..16 when %s.hosts is empty, got %d", prefix, prefix, c.Embedded))
	}
	return errors.Join(errs...)
}

func validateHostPort(h string) error {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", h, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", h)
	}
	if port == "" || strings.Trim(port, "0123456789") != "" {
		return fmt.Errorf("%q has no numeric port", h)
	}
	return nil
}

// NSQ publishes to one or more nsqd instances over the NSQ TCP protocol.
//
// It speaks the producer side of the protocol itself (pipelined PUB/MPUB with responses matched in
// order, heartbeats answered) and uses go-nsq for the protocol's definitions. go-nsq's Producer cannot
// be used: it takes no context, and reconnecting one after nsqd restarts is a data race in v1.1.0
// (its router logs the connection it no longer owns).
type NSQ struct {
	pool *pool[*nsqConn]
	dial time.Duration
	log  *slog.Logger
}

// Timings of the connection handling.
const (
	nsqReadTimeout = 65 * time.Second // nsqd heartbeats every 30 s by default; two missed means dead
)

// NewNSQ creates the publisher. It does not connect: connections are made on first use and again after
// one breaks, which lets mqtarget recover when nsqd comes back.
func NewNSQ(c NSQConfig, log *slog.Logger) (*NSQ, error) {
	if err := c.Validate("nsq"); err != nil {
		return nil, err
	}
	if len(c.Hosts) == 0 {
		return nil, errors.New("nsq.hosts: at least one host is required")
	}
	p := &NSQ{dial: c.DialTimeout, log: log}
	p.pool = newPool("nsq", c.Hosts, c.ProducersPerHost, func(ctx context.Context, addr string) (*nsqConn, error) {
		netConn, err := p.handshake(ctx, addr)
		if err != nil {
			return nil, err
		}
		return &nsqConn{conn: netConn, log: log}, nil
	})
	return p, nil
}

// Hosts implements Publisher.
func (p *NSQ) Hosts() []string { return p.pool.hosts }

// ValidateTopic applies nsqd's rules: 1-64 characters of [.a-zA-Z0-9_-], optionally ending in #ephemeral.
func (p *NSQ) ValidateTopic(name string) error {
	if !nsq.IsValidTopicName(name) {
		return fmt.Errorf("%q is not a valid NSQ topic (1-64 of [.a-zA-Z0-9_-], optional #ephemeral)", name)
	}
	return nil
}

// Publish implements Publisher with PUB.
func (p *NSQ) Publish(ctx context.Context, host int, topic string, body []byte) error {
	return p.wait(ctx, host, func(b []byte) []byte { return appendPUB(b, topic, body) })
}

// PublishBatch implements Publisher with one MPUB.
func (p *NSQ) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	return p.wait(ctx, host, func(b []byte) []byte { return appendMPUB(b, topic, bodies) })
}

// PublishAsync implements Publisher; done runs on the connection's read loop, so it must be quick.
func (p *NSQ) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	return p.send(context.Background(), host, func(b []byte) []byte { return appendPUB(b, topic, body) }, done)
}

// wait sends a command and waits for nsqd's answer or the end of ctx.
func (p *NSQ) wait(ctx context.Context, host int, enc func([]byte) []byte) error {
	return await(ctx, func(done func(error)) error { return p.send(ctx, host, enc, done) })
}

func (p *NSQ) send(ctx context.Context, host int, enc func([]byte) []byte, done func(error)) error {
	conn, err := p.pool.get(ctx, host)
	if err != nil {
		return err
	}
	return conn.send(ctx, enc, done)
}

// Ping connects to host and identifies, within ctx and the dial timeout, on a connection of its own so
// a check never queues behind publishes.
func (p *NSQ) Ping(ctx context.Context, host int) error {
	if err := p.pool.checkHost(host); err != nil {
		return err
	}
	conn, err := p.handshake(ctx, p.pool.hosts[host])
	if err != nil {
		return err
	}
	return conn.Close()
}

// handshake dials addr, sends the protocol magic and IDENTIFY, and checks nsqd's OK.
func (p *NSQ) handshake(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.dial)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, wrap(ErrUnavailable, err)
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	cmd, err := nsq.Identify(map[string]interface{}{"client_id": "mqtarget", "user_agent": "mqtarget", "feature_negotiation": false})
	if err == nil {
		var buf bytes.Buffer
		buf.Write(nsq.MagicV2)
		if _, err = cmd.WriteTo(&buf); err == nil {
			_, err = conn.Write(buf.Bytes())
		}
	}
	var (
		frameType int32
		data      []byte
	)
	if err == nil {
		frameType, data, err = nsq.ReadUnpackedResponse(conn)
	}
	if err == nil && (frameType != nsq.FrameTypeResponse || string(data) != "OK") {
		err = wrap(ErrRejected, fmt.Errorf("IDENTIFY answered %q", data))
	}
	if err != nil {
		conn.Close()
		if errors.Is(err, ErrRejected) {
			return nil, err
		}
		return nil, wrap(ErrUnavailable, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// Close closes every connection, failing what is still pending so every callback runs, and waits for
// the read loops. It is idempotent.
func (p *NSQ) Close() error {
	p.pool.close()
	return nil
}

// nsqConn is one producer connection. nsqd answers commands in order, so pending callbacks are a FIFO.
type nsqConn struct {
	conn net.Conn
	log  *slog.Logger

	wmu sync.Mutex // serialises writes, so the order of bytes matches the order of pending
	buf []byte     // frame buffer, reused under wmu

	pmu     sync.Mutex // guards pending and dead; the read loop pops while writers push
	pending []pendingCmd
	dead    bool
}

// pendingCmd is a command awaiting nsqd's answer. by is when its caller stops caring: an answer still
// missing well after that means nsqd stalled.
type pendingCmd struct {
	done func(error)
	by   time.Time
}

// errStalled fails a connection on which nsqd left a command unanswered past its caller's deadline.
// Without it a frozen nsqd would pile up callbacks until the read timeout, at the offered request rate.
var errStalled = errors.New("nsqd stopped answering on this connection")

func (c *nsqConn) shutdown() { c.fail(ErrClosed) }

func (c *nsqConn) isDead() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.dead
}

// send writes one command and queues done for its answer. If it returns an error, done is not called.
// The write is bounded by ctx's deadline too: a write that cannot finish means the broker is stuck.
func (c *nsqConn) send(ctx context.Context, enc func([]byte) []byte, done func(error)) error {
	now := time.Now()
	by := now.Add(nsqWriteTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(by) {
		by = dl
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.pmu.Lock()
	if c.dead {
		c.pmu.Unlock()
		return wrap(ErrUnavailable, errors.New("connection closed"))
	}
	if len(c.pending) > 0 && now.Sub(c.pending[0].by) > nsqStallGrace {
		c.pmu.Unlock()
		c.fail(errStalled)
		return wrap(ErrUnavailable, errStalled)
	}
	c.pending = append(c.pending, pendingCmd{done: done, by: by})
	c.pmu.Unlock()
	c.buf = enc(c.buf[:0])
	_ = c.conn.SetWriteDeadline(by)
	_, err := c.conn.Write(c.buf)
	if cap(c.buf) > 1<<20 {
		c.buf = nil // don't pin a buffer sized for one huge message
	}
	if err == nil {
		return nil
	}
	c.pmu.Lock()
	if c.dead {
		// The read loop already failed every pending callback, ours included.
		c.pmu.Unlock()
		return nil
	}
	c.pending = c.pending[:len(c.pending)-1] // ours: no later push can happen while we hold wmu
	c.pmu.Unlock()
	c.fail(err)
	return wrap(ErrUnavailable, err)
}

const (
	nsqWriteTimeout = 5 * time.Second // bounds writes without a context deadline (async publishes)
	nsqStallGrace   = time.Second     // how far past its deadline the oldest command may go unanswered
)

// readLoop matches nsqd's answers to pending commands and answers heartbeats, until the connection ends.
func (c *nsqConn) readLoop() {
	r := bufio.NewReader(c.conn)
	for {
		_ = c.conn.SetReadDeadline(time.Now().Add(nsqReadTimeout))
		frameType, data, err := nsq.ReadUnpackedResponse(r)
		if err != nil {
			c.fail(err)
			return
		}
		switch {
		case frameType == nsq.FrameTypeResponse && string(data) == "_heartbeat_":
			c.wmu.Lock()
			_ = c.conn.SetWriteDeadline(time.Now().Add(nsqWriteTimeout))
			_, err = c.conn.Write([]byte("NOP\n"))
			c.wmu.Unlock()
			if err != nil {
				c.fail(err)
				return
			}
		case frameType == nsq.FrameTypeResponse:
			c.pop(nil)
		case frameType == nsq.FrameTypeError:
			// nsqd closes the connection after most errors; the read that follows fails the rest.
			c.pop(wrap(ErrRejected, nsq.ErrProtocol{Reason: string(data)}))
		default:
			c.fail(fmt.Errorf("unexpected frame type %d", frameType))
			return
		}
	}
}

func (c *nsqConn) pop(err error) {
	c.pmu.Lock()
	if len(c.pending) == 0 {
		c.pmu.Unlock()
		c.log.Warn("nsqd answered a command that was not sent", "addr", c.conn.RemoteAddr().String())
		return
	}
	done := c.pending[0].done
	c.pending[0] = pendingCmd{}
	c.pending = c.pending[1:]
	c.pmu.Unlock()
	done(err)
}

// fail closes the connection and fails every pending command; later calls do nothing.
func (c *nsqConn) fail(cause error) {
	c.pmu.Lock()
	if c.dead {
		c.pmu.Unlock()
		return
	}
	c.dead = true
	pending := c.pending
	c.pending = nil
	c.pmu.Unlock()
	_ = c.conn.Close()
	err := cause
	if !errors.Is(cause, ErrClosed) {
		err = wrap(ErrUnavailable, cause)
	}
	if len(pending) > 0 {
		c.log.Warn("nsqd connection lost with commands pending", "addr", c.conn.RemoteAddr().String(), "pending", len(pending), "err", cause)
	}
	for _, p := range pending {
		p.done(err)
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
