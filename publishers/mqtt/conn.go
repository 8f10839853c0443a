package mqtt

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahosession "github.com/eclipse/paho.golang/paho/session"

	"github.com/mqtarget/mqtarget/publishers"
)

// writeTimeout bounds one write to a broker: a broker that stopped reading for that long has lost the
// connection (paho writes without deadlines, so without it a publish would block in the write past its
// own deadline and its goroutine for good).
const writeTimeout = 5 * time.Second

// closeWriteTimeout bounds the DISCONNECT written when a connection is closed.
const closeWriteTimeout = 100 * time.Millisecond

// netConn is the connection paho reads and writes. paho writes from every publishing goroutine, its
// pinger and its session: as a sync.Locker it makes packets.ControlPacket.WriteTo hold the lock for a
// whole packet (tls.Conn and this wrapper would otherwise interleave the packets' parts), and while
// that lock is held Write gathers the packet's parts and Unlock writes them in one Write. WriteTo
// hands them over as net.Buffers, which writes each part with its own Write to anything but a
// *net.TCPConn: three or four syscalls (and TLS records) per PUBLISH, where a bare paho client on a
// TCP connection makes one writev. Every write is bounded by writeTimeout and a failed one closes the
// connection, so paho's reader ends and with it the client (a packet whose gathered write fails at
// Unlock fails that way: paho saw its parts taken, the connection's end fails what awaits an answer).
type netConn struct {
	net.Conn
	mu      sync.Mutex
	held    bool          // Lock holds mu: Write gathers into pending
	pending []byte        // the parts of the packet being written under Lock
	closing atomic.Bool   // DISCONNECT on the way: a broker not reading must not hold Close up
	tap     *ackTap       // nil: answers not checked beyond paho (consumer and ping connections)
	in      *bufio.Reader // the connection through tapReader, read in whole buffers (readBuffer)
	// serial: Write itself holds the lock (paho.mqtt.golang writes each packet in one Write, from its
	// writer and its pinger, and does not lock; paho.golang locks around a packet itself).
	serial bool
}

// maxKeptPending: a gathering buffer grown past this by a large message is not kept for the next.
const maxKeptPending = 64 << 10

// Lock implements sync.Locker for paho's packet writes: until Unlock, Write gathers.
func (c *netConn) Lock() {
	c.mu.Lock()
	c.held = true
}

// Unlock writes what Write gathered, in one Write, and releases the lock.
func (c *netConn) Unlock() {
	if len(c.pending) > 0 {
		_, _ = c.write(c.pending) // a failure closed the connection: see netConn
	}
	if cap(c.pending) > maxKeptPending {
		c.pending = nil
	} else {
		c.pending = c.pending[:0]
	}
	c.held = false
	c.mu.Unlock()
}

// readBuffer is how much one read takes from the connection. paho reads a packet in pieces (its type
// byte, its length, its rest); read in those pieces, an answer ahead that came with the real one would
// still sit unread, unchecked by the tap, when paho hands the real one over and the publish that takes
// the next identifier writes it (which makes the answer ahead look like that publish's). Read whole,
// the tap checks everything the broker sent so far before paho sees any of it, in fewer syscalls.
const readBuffer = 4 << 10

func newNetConn(raw net.Conn, tap *ackTap) *netConn {
	c := &netConn{Conn: raw, tap: tap}
	c.in = bufio.NewReaderSize(tapReader{c}, readBuffer)
	return c
}

// Read hands paho what the broker sent once the tap found every acknowledgement in it answering
// something outstanding; otherwise the connection ends and paho sees an error instead. paho has one
// reader per connection: Read is never called concurrently.
func (c *netConn) Read(b []byte) (int, error) { return c.in.Read(b) }

// tapReader reads the connection under the tap.
type tapReader struct{ c *netConn }

func (r tapReader) Read(b []byte) (int, error) {
	n, err := r.c.Conn.Read(b)
	if n > 0 && r.c.tap != nil {
		if terr := r.c.tap.read(b[:n]); terr != nil {
			_ = r.c.Conn.Close()
			return 0, terr
		}
	}
	return n, err
}

func (c *netConn) Write(b []byte) (int, error) {
	if c.serial {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	if c.tap != nil {
		c.tap.wrote(b)
	}
	if c.held {
		c.pending = append(c.pending, b...)
		return len(b), nil
	}
	return c.write(b)
}

// write writes b to the connection within its deadline, closing the connection when that fails.
func (c *netConn) write(b []byte) (int, error) {
	d := writeTimeout
	if c.closing.Load() {
		d = closeWriteTimeout
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(d))
	n, err := c.Conn.Write(b)
	if err != nil {
		_ = c.Conn.Close()
	}
	return n, err
}

// session is one MQTT connection: a protocol client (link) over netConn, CONNECT answered by a
// successful CONNACK.
type session struct {
	link    link
	raw     *netConn
	ctx     context.Context // ends when the connection is gone: the owner's watcher cancels it once paho's client is done
	cancel  context.CancelFunc
	born    time.Time
	maxSize uint32 // the broker's Maximum Packet Size (CONNACK); 0: the protocol's
	maxQoS  byte   // the broker's Maximum QoS (CONNACK)
	// slots are the publishes in flight: at most mqtt.max_inflight and the broker's Receive Maximum
	// (CONNACK), so paho's own send quota never makes a publish wait.
	slots chan struct{}
	// answered: the broker acknowledged or refused a publish on it. Lost young, such a connection is
	// redialled at once within the redial policy's churn budget (mosquitto 2.0 closes the connection
	// after each publish its ACL denies), else with backoff.
	answered atomic.Bool
}

// dialer makes the sessions of a publisher or consumer.
type dialer struct {
	cfg      Config
	tls      *tls.Config // nil: plain TCP
	password []byte
	idBase   string // client_id prefix and a random part, unique per publisher or consumer
	log      *slog.Logger
}

func newDialer(c Config, role string, log *slog.Logger) (*dialer, error) {
	if err := c.Validate("mqtt"); err != nil {
		return nil, err
	}
	if len(c.Servers) == 0 {
		return nil, errors.New("mqtt.servers: at least one server is required")
	}
	tc, err := c.TLSConfig.Client("mqtt")
	if err != nil {
		return nil, err
	}
	d := &dialer{cfg: c, tls: tc, log: log}
	if c.PasswordFile != "" {
		if d.password, err = readPassword(c.PasswordFile); err != nil {
			return nil, fmt.Errorf("mqtt.password_file: %w", err)
		}
	}
	var r [4]byte
	_, _ = crand.Read(r[:])
	d.idBase = c.ClientID + "-" + role + "-" + hex.EncodeToString(r[:])
	return d, nil
}

// readPassword reads the first line of path, bounded.
func readPassword(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, maxPasswordSize+1)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	line = strings.TrimSuffix(line, "\r")
	if len(line) > maxPasswordSize || line == "" {
		return nil, fmt.Errorf("%s: the first line must hold the password (1..%d bytes)", path, maxPasswordSize)
	}
	return []byte(line), nil
}

// onPublishFunc receives a PUBLISH the broker sent (the consumer's messages, the $SYS version).
type onPublishFunc func(topic string, payload []byte)

// link is one connection's protocol client: paho.golang's at MQTT 5 (link5, below), paho.mqtt.golang's
// at 3.1.1 (link311, session311.go). dial picks it by mqtt.version; nothing else looks at the version.
type link interface {
	// publish sends one PUBLISH and waits for its acknowledgement (qos 0: the write) or ctx; an answer
	// that refuses it is ErrRejected, anything else is returned as it came.
	publish(ctx context.Context, qos byte, topic string, body []byte) error
	// subscribe subscribes to topic and returns the SUBACK's code for it (0x80 or more: refused).
	subscribe(ctx context.Context, topic string, qos byte) (byte, error)
	// done is closed once the connection ended and the client's goroutines with it.
	done() <-chan struct{}
	// release waits, after done, for calls still running into the ended connection (3.1.1: up to
	// writeTimeout; 5: none); the owner of a connection found lost calls it.
	release()
	// disconnect sends DISCONNECT (bounded by closeWriteTimeout), closes the connection and waits for
	// done and release.
	disconnect()
}

// dial connects to addr and exchanges CONNECT/CONNACK within ctx and the dial timeout, with a clean
// start (clean session at 3.1.1) and no session expiry: the broker keeps nothing of a connection after
// it, and the client, whose session lives as long as it does, has nothing to resend on another (see
// doc.go). onPublish, when set, receives what the broker sends (the consumer's messages); tap, when
// set, checks its answers. The version is chosen here, and only here.
func (d *dialer) dial(ctx context.Context, addr, id string, tap *ackTap, onPublish onPublishFunc, onError func(error)) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout)
	defer cancel()
	raw, err := d.open(ctx, addr)
	if err != nil {
		return nil, err
	}
	if onPublish == nil {
		onPublish = func(string, []byte) {}
	}
	nc := newNetConn(raw, tap)
	// The clients report errors on goroutines of their own: once close began, the errors are its own
	// doing (a closed connection), not a loss, and must reach no callback (whose logger may be gone
	// with its owner).
	lost := func(err error) {
		if !nc.closing.Load() {
			onError(err)
		}
	}
	var s *session
	if d.cfg.Version == version311 {
		s, err = d.dial311(ctx, nc, id, onPublish, lost)
	} else {
		s, err = d.dial5(ctx, nc, id, onPublish, lost)
	}
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	s.raw, s.born = nc, time.Now()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// open makes the network connection to addr (TCP, and TLS when configured) within ctx.
func (d *dialer) open(ctx context.Context, addr string) (net.Conn, error) {
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		tc := d.tls.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tlsConn := tls.Client(raw, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		raw = tlsConn
	}
	return raw, nil
}

// dial5 is dial at MQTT 5: a paho.golang client over nc.
func (d *dialer) dial5(ctx context.Context, nc *netConn, id string, onPublish onPublishFunc, lost func(error)) (*session, error) {
	cc := paho.ClientConfig{
		Conn:          nc,
		Session:       newGuardedState(),
		PacketTimeout: maxAckWait,
		OnClientError: lost,
		OnServerDisconnect: func(dp *paho.Disconnect) {
			lost(fmt.Errorf("broker sent DISCONNECT, reason 0x%02x%s%s", dp.ReasonCode,
				reasonName((&packets.Disconnect{ReasonCode: dp.ReasonCode}).Reason()), reasonString(dp.Properties)))
		},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			onPublish(pr.Packet.Topic, pr.Packet.Payload)
			return true, nil
		}},
	}
	client := paho.NewClient(cc)
	cp := &paho.Connect{
		ClientID:   id,
		KeepAlive:  uint16(d.cfg.KeepAlive / time.Second),
		CleanStart: true,
		Properties: &paho.ConnectProperties{ReceiveMaximum: ptr(uint16(d.cfg.MaxInFlight))},
	}
	if d.cfg.User != "" {
		cp.Username, cp.UsernameFlag = d.cfg.User, true
	}
	if d.password != nil {
		cp.Password, cp.PasswordFlag = d.password, true
	}
	// A ctx that ends interrupts Connect, which then closes the connection itself.
	ca, err := client.Connect(ctx, cp)
	if err != nil {
		if ca != nil {
			return nil, fmt.Errorf("CONNACK refused the connection: reason 0x%02x%s%s", ca.ReasonCode,
				reasonName((&packets.Connack{ReasonCode: ca.ReasonCode}).Reason()), reasonString(ca.Properties))
		}
		return nil, err
	}
	s := &session{link: link5{client}, maxQoS: 2}
	window := d.cfg.MaxInFlight
	if ca.Properties != nil && ca.Properties.ReceiveMaximum != nil && int(*ca.Properties.ReceiveMaximum) < window {
		window = max(1, int(*ca.Properties.ReceiveMaximum))
	}
	s.slots = make(chan struct{}, window)
	if ca.Properties != nil {
		if ca.Properties.MaximumPacketSize != nil {
			s.maxSize = *ca.Properties.MaximumPacketSize
		}
		if ca.Properties.MaximumQoS != nil {
			s.maxQoS = *ca.Properties.MaximumQoS
		}
	}
	return s, nil
}

// errAnswered marks a publish the broker refused with a reason code: an answer, which shows the
// connection worked (session.answered).
var errAnswered = errors.New("broker answered")

// errNotWritten marks a publish its client refused because the connection had ended: nothing of it
// reached the broker, so it may go again on the host's next connection (Publisher.sendOnce).
var errNotWritten = errors.New("connection ended before the publish was written")

// link5 is an MQTT 5 connection's paho.golang client.
type link5 struct{ c *paho.Client }

func (l link5) publish(ctx context.Context, qos byte, topic string, body []byte) error {
	resp, err := l.c.Publish(ctx, &paho.Publish{QoS: qos, Topic: topic, Payload: body})
	switch {
	case resp != nil && resp.ReasonCode >= 0x80: // paho returns a refused PUBREC (QoS 2) without error
		reason := ""
		if resp.Properties != nil && resp.Properties.ReasonString != "" {
			reason = " " + resp.Properties.ReasonString
		}
		// PUBACK's and PUBREC's refusal codes mean the same (mosquitto: 0x87, "The PUBLISH is not authorized.")
		return fmt.Errorf("%w: %w reason 0x%02x%s%s", publishers.ErrRejected, errAnswered, resp.ReasonCode,
			reasonName((&packets.Puback{ReasonCode: resp.ReasonCode}).Reason()), reason)
	case errors.Is(err, paho.ErrInvalidArguments):
		return fmt.Errorf("%w: %w", publishers.ErrRejected, err)
	case errors.Is(err, pahosession.ErrNoConnection): // from AddToSession, before anything is written
		return fmt.Errorf("%w: %w", errNotWritten, err)
	}
	return err
}

func (l link5) subscribe(ctx context.Context, topic string, qos byte) (byte, error) {
	sa, err := l.c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: qos}}})
	if err != nil {
		return 0, err
	}
	if len(sa.Reasons) != 1 {
		return 0, fmt.Errorf("SUBACK for %q holds %d reasons, want 1", topic, len(sa.Reasons))
	}
	return sa.Reasons[0], nil
}

func (l link5) done() <-chan struct{} { return l.c.Done() }

func (l link5) release() { <-l.c.Done() }

func (l link5) disconnect() {
	_ = l.c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	<-l.c.Done()
}

// drainWait bounds how long Close lets QoS 2 publishes in flight finish before it disconnects.
const drainWait = time.Second

// drain waits up to d for the publishes in flight to be acknowledged (new ones are refused once the
// publisher closes), so that a Close with publishes in flight acknowledges what the broker took
// rather than failing it for want of the answer.
func (s *session) drain(d time.Duration) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	end := time.After(d)
	for len(s.slots) > 0 {
		select {
		case <-t.C:
		case <-end:
			return
		case <-s.link.done():
			return
		}
	}
}

// close ends the session: DISCONNECT (bounded by closeWriteTimeout) and the connection closed; it
// waits for the client's goroutines.
func (s *session) close() {
	s.raw.closing.Store(true)
	s.link.disconnect()
}

// maxAckWait bounds how long paho keeps a publish waiting for its acknowledgement when the caller's
// context has no earlier deadline (async publishes): their done runs within it of the publish being
// handed to the connection.
const maxAckWait = 10 * time.Second

func ptr[T any](v T) *T { return &v }

// reasonString is the reason string of a CONNACK's or DISCONNECT's properties after a space, or
// nothing when the broker gave none.
func reasonString(p any) string {
	var s string
	switch p := p.(type) {
	case *paho.ConnackProperties:
		if p != nil {
			s = p.ReasonString
		}
	case *paho.DisconnectProperties:
		if p != nil {
			s = p.ReasonString
		}
	}
	if s == "" {
		return ""
	}
	return " " + s
}

// reasonName is the name of an MQTT 5 reason code, from paho's description of it ("Not authorized - The
// Client is not authorized to connect."), in parentheses: brokers seldom add a reason string, and a
// bare 0x87 means nothing to whoever reads the 503.
func reasonName(description string) string {
	name, _, _ := strings.Cut(description, " - ")
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// clientID is the client identifier of connection role to host index i.
func (d *dialer) clientID(i int) string { return d.idBase + "-" + strconv.Itoa(i) }

// redial is one host's backoff state: the shared policy (publishers.Redial under publishers.Backoff).
type redial struct {
	b publishers.Backoff
	r publishers.Redial
}

func (r *redial) check(now time.Time) error { return r.r.Check(now) }

func (r *redial) failed(now time.Time, err error) time.Duration { return r.r.Failed(r.b, now, err) }

// lost: a connection that lived Healthy proved itself and is redialled at once; younger, a failure
// unless it answered (publishers.Backoff's churn).
func (r *redial) lost(now time.Time, lived time.Duration, answered bool, err error) time.Duration {
	return r.r.Lost(r.b, now, lived, answered, err)
}
