package publishers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-stomp/stomp/v3/frame"
)

// STOMPConfig configures the STOMP publisher.
type STOMPConfig struct {
	// Hosts are STOMP broker addresses (host:port). Empty means: start embedded go-stomp servers.
	Hosts []string `yaml:"hosts" help:"STOMP broker addresses host:port, comma-separated; empty starts embedded go-stomp servers"`
	// Login and Passcode go into CONNECT; empty Login sends neither.
	Login    string `yaml:"login" help:"STOMP login (empty: connect without credentials)"`
	Passcode Secret `yaml:"passcode" help:"STOMP passcode (never printed)"`
	// VHost is CONNECT's host header; empty uses the host part of the broker address. RabbitMQ wants "/".
	VHost string `yaml:"vhost" help:"STOMP virtual host (CONNECT host header; RabbitMQ: /); empty uses the address's host"`
	// Prefix is put before every topic to make the destination, e.g. /queue/ or /topic/.
	Prefix string `yaml:"prefix" help:"destination prefix put before every topic: /queue/ (point-to-point) or /topic/ (publish-subscribe)"`
	// Persistent adds persistent:true to every SEND, so brokers store the messages durably.
	Persistent bool `yaml:"persistent" help:"send messages with persistent:true (stored durably by the broker)"`
	// ConnectionsPerHost is the number of STOMP connections per host. One connection's frames are written
	// one at a time (receipts are pipelined), so more than one lets concurrent writes overlap.
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
}

// DefaultSTOMPConfig returns the STOMP defaults.
func DefaultSTOMPConfig() STOMPConfig {
	return STOMPConfig{
		Prefix:             "/queue/",
		ConnectionsPerHost: 2,
		HeartBeat:          10 * time.Second,
		HeartBeatGrace:     3,
		DialTimeout:        time.Second,
		Embedded:           3,
		EmbeddedMaxBytes:   256 << 20,
	}
}

// Validate checks c; errors name the field under prefix (e.g. "stomp").
func (c STOMPConfig) Validate(prefix string) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{prefix, field}, args...)...))
	}
	for i, h := range c.Hosts {
		if err := validateHostPort(h); err != nil {
			add(fmt.Sprintf("hosts[%d]", i), "%v", err)
		}
	}
	if c.Login == "" && c.Passcode != "" {
		add("passcode", "set without stomp.login")
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
	if c.HeartBeat < 0 || c.HeartBeat%time.Millisecond != 0 {
		add("heartbeat", "must be 0 or a positive number of milliseconds, got %v", c.HeartBeat)
	}
	if c.HeartBeatReceive < 0 || c.HeartBeatReceive%time.Millisecond != 0 {
		add("heartbeat_receive", "must be 0 or a positive number of milliseconds, got %v", c.HeartBeatReceive)
	}
	if c.HeartBeatGrace < 1 || c.HeartBeatGrace > 100 {
		add("heartbeat_grace", "must be 1..100, got %d", c.HeartBeatGrace)
	}
	if c.DialTimeout <= 0 {
		add("dial_timeout", "must be positive, got %v", c.DialTimeout)
	}
	if len(c.Hosts) == 0 && (c.Embedded < 1 || c.Embedded > 16) {
		add("embedded", "must be 1..16 when %s.hosts is empty, got %d", prefix, c.Embedded)
	}
	if len(c.Hosts) == 0 && c.EmbeddedMaxBytes < 1<<20 {
		add("embedded_max_bytes", "must be at least 1048576 (1 MiB) when %s.hosts is empty, got %d", prefix, c.EmbeddedMaxBytes)
	}
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

// STOMP publishes to one or more STOMP 1.2 brokers (ActiveMQ Artemis, ActiveMQ Classic, RabbitMQ, the
// embedded go-stomp server).
//
// It speaks the client side of the protocol itself, with go-stomp's frame package encoding and decoding
// frames. go-stomp's Conn cannot be used for a load target: Conn.Send with a receipt holds the
// connection's lock until the receipt arrives (one message per round trip per connection), it has no
// non-blocking way to wait for a receipt (async would need a goroutine per message), it takes no
// context, and when a receipt waiter has given up its read loop blocks forever delivering to it.
//
// Here every SEND carries a receipt header and is written at once; the pending callbacks sit in a map
// keyed by receipt id and the connection's read loop runs them when the RECEIPT (or an ERROR) arrives.
// Sync publishes wait for their callback or their context, PublishAsync returns after the write, and the
// only goroutine per connection is its read loop (plus a heart-beat timer), which Close waits for.
type STOMP struct {
	cfg  STOMPConfig
	pool *pool[*stompConn]
	log  *slog.Logger
}

// Timings of the connection handling.
const (
	stompReceiptTimeout = 30 * time.Second // a connection whose oldest receipt is this late is dead
	stompWriteTimeout   = 5 * time.Second  // bound on one write, also when ctx allows more
)

// NewSTOMP creates the publisher. It does not connect: connections are made on first use and again
// after one breaks, so mqtarget recovers when a broker comes back.
func NewSTOMP(c STOMPConfig, log *slog.Logger) (*STOMP, error) {
	if err := c.Validate("stomp"); err != nil {
		return nil, err
	}
	if len(c.Hosts) == 0 {
		return nil, errors.New("stomp.hosts: at least one host is required")
	}
	p := &STOMP{cfg: c, log: log}
	p.pool = newPool("stomp", c.Hosts, c.ConnectionsPerHost, func(ctx context.Context, addr string) (*stompConn, error) {
		netConn, hb, err := p.handshake(ctx, addr)
		if err != nil {
			return nil, err
		}
		return newSTOMPConn(netConn, hb, p), nil
	})
	return p, nil
}

// Hosts implements Publisher.
func (p *STOMP) Hosts() []string { return p.pool.hosts }

// MaxTopicLen is the longest topic (destination name without the prefix) accepted, in bytes.
const MaxTopicLen = 255

// ValidateTopic accepts 1-255 bytes of UTF-8 without control characters, ':' or '\', not starting with
// '/' (the prefix supplies the destination type) and without whitespace at either end.
func (p *STOMP) ValidateTopic(name string) error { return validateSTOMPTopic(name) }

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
func (p *STOMP) Publish(ctx context.Context, host int, topic string, body []byte) error {
	return p.wait(ctx, host, func(c *stompConn, w *frame.Writer, receipt string) error {
		return w.Write(c.sendFrame(p.cfg.Prefix+topic, body, receipt, ""))
	})
}

// PublishBatch implements Publisher with a transaction: BEGIN, one SEND per body, COMMIT with a receipt,
// all written at once. The broker acknowledges the commit once every message is in.
func (p *STOMP) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	return p.wait(ctx, host, func(c *stompConn, w *frame.Writer, receipt string) error {
		tx := "tx-" + receipt
		if err := w.Write(frame.New(frame.BEGIN, frame.Transaction, tx)); err != nil {
			return err
		}
		for _, body := range bodies {
			if err := w.Write(c.sendFrame(p.cfg.Prefix+topic, body, "", tx)); err != nil {
				return err
			}
		}
		return w.Write(frame.New(frame.COMMIT, frame.Transaction, tx, frame.Receipt, receipt))
	})
}

// PublishAsync implements Publisher: it writes a SEND with a receipt header and returns; done runs on
// the connection's read loop when the receipt arrives (or the connection fails), so it must be quick.
func (p *STOMP) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	return p.send(context.Background(), host, func(c *stompConn, w *frame.Writer, receipt string) error {
		return w.Write(c.sendFrame(p.cfg.Prefix+topic, body, receipt, ""))
	}, done)
}

// encoder writes one request's frames; receipt is the id its last frame must ask a receipt for.
type encoder func(c *stompConn, w *frame.Writer, receipt string) error

// wait sends a request and waits for its receipt or the end of ctx.
func (p *STOMP) wait(ctx context.Context, host int, enc encoder) error {
	return await(ctx, func(done func(error)) error { return p.send(ctx, host, enc, done) })
}

func (p *STOMP) send(ctx context.Context, host int, enc encoder, done func(error)) error {
	conn, err := p.pool.get(ctx, host)
	if err != nil {
		return err
	}
	return conn.send(ctx, enc, done)
}

// Ping connects to host (CONNECT answered by CONNECTED) on a connection of its own, so a check never
// queues behind publishes.
func (p *STOMP) Ping(ctx context.Context, host int) error {
	if err := p.pool.checkHost(host); err != nil {
		return err
	}
	conn, _, err := p.handshake(ctx, p.pool.hosts[host])
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
func (p *STOMP) handshake(ctx context.Context, addr string) (net.Conn, heartBeats, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, heartBeats{}, wrap(ErrUnavailable, err)
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	hb, err := p.connect(conn, addr)
	if err != nil {
		conn.Close()
		if errors.Is(err, ErrRejected) {
			return nil, hb, err
		}
		if isTimeout(err) {
			err = fmt.Errorf("no CONNECTED in time: %w", err)
		}
		return nil, hb, wrap(ErrUnavailable, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, hb, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// connect writes CONNECT and reads the answer.
func (p *STOMP) connect(conn net.Conn, addr string) (heartBeats, error) {
	if err := frame.NewWriter(conn).Write(p.connectFrame(addr)); err != nil {
		return heartBeats{}, err
	}
	r := frame.NewReader(conn)
	var f *frame.Frame
	for f == nil { // skip heart-beats, should a broker send one first
		var err error
		if f, err = r.Read(); err != nil {
			return heartBeats{}, err
		}
	}
	switch f.Command {
	case frame.CONNECTED:
	case frame.ERROR:
		return heartBeats{}, wrap(ErrRejected, fmt.Errorf("CONNECT refused: %s", errorText(f)))
	default:
		return heartBeats{}, fmt.Errorf("CONNECT answered with %s", f.Command)
	}
	return negotiate(p.cfg.HeartBeat, p.cfg.HeartBeatReceive, f.Header.Get(frame.HeartBeat))
}

func (p *STOMP) connectFrame(addr string) *frame.Frame {
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

// negotiate applies the STOMP heart-beat rules to our offer (send, recv) and the broker's header
// "sx,sy": we send every max(send, sy) when both are non-zero, the broker every max(recv, sx).
func negotiate(send, recv time.Duration, header string) (heartBeats, error) {
	if header == "" {
		return heartBeats{}, nil
	}
	sx, sy, err := frame.ParseHeartBeat(header)
	if err != nil {
		return heartBeats{}, fmt.Errorf("CONNECTED heart-beat %q: %w", header, err)
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

func errorText(f *frame.Frame) string {
	msg := f.Header.Get(frame.Message)
	if body := strings.TrimSpace(string(f.Body)); body != "" && len(body) < 512 {
		msg += ": " + body
	}
	return msg
}

// Close closes every connection, failing what is still pending so every callback runs, and waits for
// the read loops. It is idempotent.
func (p *STOMP) Close() error {
	p.pool.close()
	return nil
}

// shutdown says DISCONNECT, then fails what is pending.
func (c *stompConn) shutdown() {
	c.disconnect()
	c.fail(ErrClosed)
}

// disconnect sends DISCONNECT (without waiting for a receipt), so brokers see a client leaving rather
// than a connection failure; best effort, within a second.
func (c *stompConn) disconnect() {
	select {
	case c.wsem <- struct{}{}:
	case <-time.After(time.Second):
		return
	}
	defer func() { <-c.wsem }()
	if c.isDead() {
		return
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_ = frame.NewWriter(c.conn).Write(frame.New(frame.DISCONNECT))
}

// stompConn is one publishing connection.
type stompConn struct {
	conn       net.Conn
	hb         heartBeats
	grace      int
	persistent bool
	log        *slog.Logger

	wsem    chan struct{} // write lock; a channel so waiting for it honours ctx
	buf     bytes.Buffer  // frames of one request, written with one Write; reused under wsem
	w       *frame.Writer // encodes into buf
	ids     uint64        // receipt id counter, under wsem
	hbTimer *time.Timer   // sends a heart-beat after hb.send without writes

	pmu     sync.Mutex // guards pending and dead; the read loop removes while writers add
	pending map[string]stompPending
	dead    bool
}

type stompPending struct {
	done func(error)
}

func newSTOMPConn(conn net.Conn, hb heartBeats, p *STOMP) *stompConn {
	c := &stompConn{
		conn:       conn,
		hb:         hb,
		grace:      p.cfg.HeartBeatGrace,
		persistent: p.cfg.Persistent,
		log:        p.log,
		wsem:       make(chan struct{}, 1),
		pending:    map[string]stompPending{},
	}
	c.w = frame.NewWriter(&c.buf)
	if hb.send > 0 {
		c.hbTimer = time.AfterFunc(hb.send, c.heartBeat)
	}
	return c
}

func (c *stompConn) isDead() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.dead
}

// sendFrame builds a SEND; receipt and tx are left out when empty.
func (c *stompConn) sendFrame(dest string, body []byte, receipt, tx string) *frame.Frame {
	f := frame.New(frame.SEND, frame.Destination, dest, frame.ContentLength, strconv.Itoa(len(body)))
	if c.persistent {
		f.Header.Add("persistent", "true")
	}
	if tx != "" {
		f.Header.Add(frame.Transaction, tx)
	}
	if receipt != "" {
		f.Header.Add(frame.Receipt, receipt)
	}
	f.Body = body
	return f
}

// send encodes one request under a fresh receipt id, registers done for that receipt and writes the
// frames. If it returns an error, done is not called.
func (c *stompConn) send(ctx context.Context, enc encoder, done func(error)) error {
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctxErr(ctx)
	}
	defer func() { <-c.wsem }()
	c.ids++
	receipt := strconv.FormatUint(c.ids, 10)
	c.buf.Reset()
	if err := enc(c, c.w, receipt); err != nil {
		return err // encoding into a buffer fails only on a bug
	}
	c.pmu.Lock()
	if c.dead {
		c.pmu.Unlock()
		return wrap(ErrUnavailable, errors.New("connection closed"))
	}
	if len(c.pending) == 0 {
		// Nothing was outstanding, so the read deadline was the idle one; now the receipt bounds it.
		_ = c.conn.SetReadDeadline(time.Now().Add(stompReceiptTimeout))
	}
	c.pending[receipt] = stompPending{done: done}
	c.pmu.Unlock()
	dl := time.Now().Add(stompWriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.conn.SetWriteDeadline(dl)
	_, err := c.conn.Write(c.buf.Bytes())
	if c.buf.Cap() > 1<<20 {
		c.buf = bytes.Buffer{} // don't pin a buffer sized for one huge message
	}
	if c.hbTimer != nil {
		c.hbTimer.Reset(c.hb.send)
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
	delete(c.pending, receipt)
	c.pmu.Unlock()
	c.fail(err)
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	return wrap(ErrUnavailable, err)
}

// heartBeat writes an EOL when nothing was written for hb.send; it runs on the timer's goroutine.
func (c *stompConn) heartBeat() {
	select {
	case c.wsem <- struct{}{}:
	default:
		// A request is being written right now; it counts as a heart-beat and resets the timer.
		return
	}
	defer func() { <-c.wsem }()
	if c.isDead() {
		return
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(stompWriteTimeout))
	if _, err := c.conn.Write([]byte{'\n'}); err != nil {
		c.fail(err)
		return
	}
	c.hbTimer.Reset(c.hb.send)
}

// idleDeadline is the read deadline with nothing outstanding: the broker's heart-beats bound it.
func (c *stompConn) idleDeadline() time.Time {
	if c.hb.recv == 0 {
		return time.Time{}
	}
	return time.Now().Add(c.hb.recv * time.Duration(c.grace))
}

// readLoop runs the callbacks of receipts and errors until the connection ends.
func (c *stompConn) readLoop() {
	r := frame.NewReader(bufio.NewReaderSize(c.conn, 4096))
	c.pmu.Lock()
	if len(c.pending) == 0 {
		_ = c.conn.SetReadDeadline(c.idleDeadline())
	}
	c.pmu.Unlock()
	for {
		f, err := r.Read()
		if err != nil {
			if isTimeout(err) {
				err = fmt.Errorf("broker silent too long (receipts or heart-beats overdue): %w", err)
			}
			c.fail(err)
			return
		}
		if f == nil { // heart-beat
			c.rearm()
			continue
		}
		switch f.Command {
		case frame.RECEIPT:
			c.pop(f.Header.Get(frame.ReceiptId), nil)
		case frame.ERROR:
			// The broker closes the connection after an ERROR; the connection is marked dead before any
			// callback runs, so no request is sent on it afterwards. The request the ERROR names is
			// rejected and the others outstanding are unavailable; when it names none, every request
			// outstanding is rejected (the broker refused one of them, e.g. a SEND in a transaction).
			err := wrap(ErrRejected, fmt.Errorf("broker ERROR: %s", errorText(f)))
			id, named := f.Header.Contains(frame.ReceiptId)
			if named {
				c.failNamed(fmt.Errorf("connection closed after a broker ERROR: %s", errorText(f)), id, err)
			} else {
				c.fail(err)
			}
			return
		default:
			c.log.Warn("stomp broker sent an unexpected frame", "addr", c.conn.RemoteAddr().String(), "command", f.Command)
		}
		c.rearm()
	}
}

// rearm sets the read deadline after a frame: the receipt window while receipts are outstanding, else
// the heart-beat bound.
func (c *stompConn) rearm() {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if len(c.pending) > 0 {
		_ = c.conn.SetReadDeadline(time.Now().Add(stompReceiptTimeout))
	} else {
		_ = c.conn.SetReadDeadline(c.idleDeadline())
	}
}

func (c *stompConn) pop(id string, err error) {
	c.pmu.Lock()
	p, ok := c.pending[id]
	delete(c.pending, id)
	c.pmu.Unlock()
	if !ok {
		c.log.Warn("stomp broker sent a receipt nobody waits for", "addr", c.conn.RemoteAddr().String(), "receipt", id)
		return
	}
	p.done(err)
}

// fail closes the connection and fails every pending request; later calls do nothing.
func (c *stompConn) fail(cause error) { c.failNamed(cause, "", nil) }

// failNamed is fail, with the request of receipt id failed with namedErr instead.
func (c *stompConn) failNamed(cause error, id string, namedErr error) {
	c.pmu.Lock()
	if c.dead {
		c.pmu.Unlock()
		return
	}
	c.dead = true
	pending := c.pending
	c.pending = nil
	c.pmu.Unlock()
	if c.hbTimer != nil {
		c.hbTimer.Stop()
	}
	_ = c.conn.Close()
	err := cause
	if !errors.Is(cause, ErrClosed) && !errors.Is(cause, ErrRejected) {
		err = wrap(ErrUnavailable, cause)
	}
	switch {
	case errors.Is(cause, ErrClosed):
	case len(pending) > 0:
		c.log.Warn("stomp connection lost with requests pending", "addr", c.conn.RemoteAddr().String(), "pending", len(pending), "err", cause)
	default:
		c.log.Debug("stomp connection lost", "addr", c.conn.RemoteAddr().String(), "err", cause)
	}
	for rid, p := range pending {
		if namedErr != nil && rid == id {
			p.done(namedErr)
		} else {
			p.done(err)
		}
	}
}
