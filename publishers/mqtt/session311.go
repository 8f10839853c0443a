package mqtt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	paho311 "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// MQTT 3.1.1 over github.com/eclipse/paho.mqtt.golang (v1.5.1). That client reconnects, resumes its
// session and resends what was in flight unless told not to; here it is told not to, every way it has:
//
//   - one client per connection, as at MQTT 5: AutoReconnect and ConnectRetry off, so a lost connection
//     ends the client, and the host redials under mqtarget's own backoff (publisher.go);
//   - CleanSession on and ResumeSubs off: the broker drops the session with the connection, and paho's
//     resume (the code that resends stored PUBLISHes with DUP set) has nothing to do;
//   - its Store keeps nothing (endStore): even a resume would find no message to send again, and no
//     payload is held in memory beyond paho's own in-flight token.
//
// paho.mqtt.golang matches an acknowledgement by packet identifier only: a PUBACK for an identifier it
// does not know is dropped (a DummyToken), but a PUBACK (or PUBCOMP) for an identifier it allocated and
// not yet written, or a PUBCOMP where a PUBREC is due, completes that publish. The connection carries the
// same tap as at MQTT 5 (proto.go), which ends the connection before paho reads such an answer.

// version311 is mqtt.version's value for MQTT 3.1.1.
const version311 = "3.1.1"

// qos2Window311 bounds the QoS 2 PUBLISHes on the wire awaiting their PUBCOMP at 3.1.1, where CONNACK
// announces no Receive Maximum: mosquitto (2.0.11) holds a 3.1.1 client to its max_inflight_messages
// (20 by default) for incoming QoS 2 all the same and closes the connection of one that sends the
// 21st (every publish in flight then fails: seen here with 21 and 40, none with 20). QoS 1 it does not
// limit. The rest of mqtt.max_inflight waits in order for a slot, as at MQTT 5.
const qos2Window311 = 20

// handoff311 bounds how long paho.mqtt.golang's Publish and Subscribe wait for the client's writer to
// take their packet (its WriteTimeout). Normally that is the time the packets ahead take to be written;
// a broker that stopped reading holds the writer (up to writeTimeout) and a publish queued behind it
// fails after handoff311 unsent (503). Once the connection ended nothing takes the packet: a call made
// just before waits the whole handoff311, and Close waits for such calls (at 5 s, writeTimeout, every
// Close under load took 5 s; the conformance suite's close checks now take about 1 s).
const handoff311 = time.Second

// link311 is an MQTT 3.1.1 connection's paho.mqtt.golang client.
type link311 struct {
	c     paho311.Client
	raw   *netConn
	ended chan struct{} // closed once the client stopped every goroutine of the connection (end)
	once  sync.Once

	mu       sync.Mutex
	released bool           // release began: no new calls
	calls    sync.WaitGroup // call's goroutines
}

// end marks the client stopped. paho.mqtt.golang has no Done: its last acts are, on a lost connection,
// the ConnectionLostHandler (started once its workers stopped and its tokens were failed), and on a
// Disconnect, closing its Store (likewise after both). Exactly one of the two happens per connection;
// what runs after either is the return of the goroutine that called it.
func (l *link311) end() { l.once.Do(func() { close(l.ended) }) }

// dial311 is dial at MQTT 3.1.1: a paho.mqtt.golang client over nc (already connected: paho dials
// nothing, its CustomOpenConnectionFn hands it nc once).
func (d *dialer) dial311(ctx context.Context, nc *netConn, id string, onPublish onPublishFunc, lost func(error)) (*session, error) {
	nc.serial = true
	l := &link311{raw: nc, ended: make(chan struct{})}
	store := &endStore{l: l}
	var handed atomic.Bool
	o := paho311.NewClientOptions()
	o.AddBroker("tcp://" + nc.RemoteAddr().String()) // a name only: the connection is nc
	o.SetCustomOpenConnectionFn(func(*url.URL, paho311.ClientOptions) (net.Conn, error) {
		if handed.Swap(true) {
			return nil, errors.New("mqtt: one connection per client")
		}
		return nc, nil
	})
	o.SetClientID(id)
	o.SetProtocolVersion(4) // 3.1.1, never falling back to 3.1
	o.SetCleanSession(true)
	o.SetAutoReconnect(false)
	o.SetConnectRetry(false)
	o.SetResumeSubs(false)
	o.SetStore(store)
	o.SetOrderMatters(true) // handlers run on paho's router goroutine, which the client stops: none of its own
	o.SetKeepAlive(d.cfg.KeepAlive)
	o.SetPingTimeout(d.cfg.KeepAlive) // a broker that answers no ping within a keep alive loses the connection
	o.SetWriteTimeout(handoff311)     // see handoff311; the writes themselves netConn bounds (writeTimeout)
	if dl, ok := ctx.Deadline(); ok {
		o.SetConnectTimeout(time.Until(dl))
	}
	if d.cfg.User != "" {
		o.SetUsername(d.cfg.User)
	}
	if d.password != nil {
		o.SetPassword(string(d.password))
	}
	o.SetDefaultPublishHandler(func(_ paho311.Client, m paho311.Message) { onPublish(m.Topic(), m.Payload()) })
	o.SetConnectionLostHandler(func(_ paho311.Client, err error) {
		lost(err)
		l.end()
	})
	l.c = paho311.NewClient(o)
	// paho's Connect takes no context: an ended ctx closes the connection under it, which fails it.
	stop := context.AfterFunc(ctx, func() { _ = nc.Conn.Close() })
	t := l.c.Connect()
	<-t.Done()
	interrupted := !stop()
	if err := t.Error(); err != nil {
		if rc := t.(*paho311.ConnectToken).ReturnCode(); rc != packets.Accepted && rc != packets.ErrNetworkError {
			return nil, fmt.Errorf("CONNACK refused the connection: return code %d (%s)", rc, packets.ConnackReturnCodes[rc])
		}
		if interrupted && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	store.armed.Store(true)
	window := d.cfg.MaxInFlight
	if d.cfg.QoS == 2 {
		window = min(window, qos2Window311)
	}
	s := &session{link: l, maxQoS: 2, slots: make(chan struct{}, window)}
	if interrupted { // connected as ctx ended: the connection is closed already
		nc.closing.Store(true)
		l.disconnect()
		return nil, ctx.Err()
	}
	return s, nil
}

// errReleased is call's error on a connection that ended before the call: f never ran.
var errReleased = errors.New("connection lost")

// call runs f, a paho call, and waits for the token it returns to complete, for ctx or for the
// connection's end. paho's Publish and Subscribe hand their packet to the client's writer and wait
// for it to be taken up to handoff311 whatever the caller's deadline; when the connection ends under
// them nothing takes it and they wait that long. So f runs on a goroutine of the link's, which
// release waits for.
func (l *link311) call(ctx context.Context, f func() paho311.Token) (paho311.Token, error) {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil, errReleased
	}
	l.calls.Add(1)
	l.mu.Unlock()
	ch := make(chan paho311.Token, 1)
	go func() {
		defer l.calls.Done()
		ch <- f()
	}()
	var t paho311.Token
	select {
	case t = <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.ended:
		return nil, errors.New("connection lost")
	}
	select {
	case <-t.Done():
		return t, t.Error()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.ended: // its tokens are completed by then: a PUBACK that came counts
		select {
		case <-t.Done():
			return t, t.Error()
		default:
			return nil, errors.New("connection lost")
		}
	}
}

func (l *link311) publish(ctx context.Context, qos byte, topic string, body []byte) error {
	_, err := l.call(ctx, func() paho311.Token { return l.c.Publish(topic, qos, false, body) })
	if errors.Is(err, paho311.ErrNotConnected) || errors.Is(err, errReleased) { // checked before anything is written
		return fmt.Errorf("%w: %w", errNotWritten, err)
	}
	return err
}

func (l *link311) subscribe(ctx context.Context, topic string, qos byte) (byte, error) {
	// nil handler: what arrives goes to the default handler, onPublish
	t, err := l.call(ctx, func() paho311.Token { return l.c.Subscribe(topic, qos, nil) })
	if err != nil {
		return 0, err
	}
	code, ok := t.(*paho311.SubscribeToken).Result()[topic]
	if !ok {
		return 0, fmt.Errorf("SUBACK names no code for %q", topic)
	}
	return code, nil
}

func (l *link311) done() <-chan struct{} { return l.ended }

// release waits, once the connection ended, for the calls still handing a packet to it.
func (l *link311) release() {
	<-l.ended
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	l.calls.Wait()
}

// disconnect lets paho write DISCONNECT for up to closeWriteTimeout, then closes the connection
// (paho's Disconnect may return before it stopped) and waits until the client did.
func (l *link311) disconnect() {
	l.c.Disconnect(uint(closeWriteTimeout / time.Millisecond))
	_ = l.raw.Conn.Close()
	l.release()
}

// endStore is paho.mqtt.golang's message store for one connection. It keeps nothing: there is no
// session to resume (clean session, no reconnect) and nothing may be sent twice. Its Close, once the
// connection was made, is paho's last act of a Disconnect (link311.end).
type endStore struct {
	l     *link311
	armed atomic.Bool // connected: a failed Connect closes the store too, with nothing to wait for
}

func (*endStore) Open()                             {}
func (*endStore) Put(string, packets.ControlPacket) {}
func (*endStore) Get(string) packets.ControlPacket  { return nil }
func (*endStore) All() []string                     { return nil }
func (*endStore) Del(string)                        {}
func (*endStore) Reset()                            {}
func (s *endStore) Close() {
	if s.armed.Load() {
		s.l.end()
	}
}
