package mqtt

import (
	"bufio"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
)

// rawClient is an MQTT 5 client written out packet by packet, so a test can send what paho would not
// (no acknowledgements, a flood of PINGREQ) and see exactly what the server sends.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// dialRaw connects and reads the CONNACK; receiveMax 0 sends no Receive Maximum.
func dialRaw(t *testing.T, addr, id string, receiveMax uint16) *rawClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &rawClient{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	cp := packets.NewControlPacket(packets.CONNECT)
	cn := cp.Content.(*packets.Connect)
	cn.ClientID, cn.CleanStart, cn.KeepAlive, cn.Properties = id, true, 30, &packets.Properties{}
	if receiveMax > 0 {
		cn.Properties.ReceiveMaximum = &receiveMax
	}
	if ca := c.roundTrip(t, cp); ca.Type != packets.CONNACK || ca.Content.(*packets.Connack).ReasonCode != 0 {
		t.Fatalf("%s: CONNACK: %v", id, ca)
	}
	return c
}

// roundTrip writes p and reads the answer within 10 s.
func (c *rawClient) roundTrip(t *testing.T, p *packets.ControlPacket) *packets.ControlPacket {
	t.Helper()
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.conn.SetDeadline(time.Time{}) }()
	if err := c.write(p); err != nil {
		t.Fatal(err)
	}
	a, err := packets.ReadPacket(c.r)
	if err != nil {
		t.Fatalf("answer to %v: %v", p, err)
	}
	return a
}

func (c *rawClient) write(ps ...*packets.ControlPacket) error {
	for _, p := range ps {
		if _, err := p.WriteTo(c.w); err != nil {
			return err
		}
	}
	return c.w.Flush()
}

func (c *rawClient) subscribe(t *testing.T, topic string, qos byte) {
	t.Helper()
	sp := packets.NewControlPacket(packets.SUBSCRIBE)
	sp.Content.(*packets.Subscribe).PacketID = 1
	sp.Content.(*packets.Subscribe).Subscriptions = []packets.SubOptions{{Topic: topic, QoS: qos}}
	if sa, ok := c.roundTrip(t, sp).Content.(*packets.Suback); !ok || len(sa.Reasons) != 1 || sa.Reasons[0] != qos {
		t.Fatalf("SUBACK: %v", sa)
	}
}

// peer answers what the server sends from a writer of its own, so that neither side's write waits on
// the other's read: PUBACK (or PUBREC, then PUBCOMP) to every message, PUBREL to a PUBREC; with pings,
// four PINGREQs after each batch of answers (mochi ran its NextImmediate after every packet a client
// sent). It also writes what send queues: a publisher's messages.
type peer struct {
	c     *rawClient
	pings bool
	got   atomic.Int64 // messages received
	mu    sync.Mutex
	queue []*packets.ControlPacket // for the writer
	wake  chan struct{}            // (buffered 1) queue has something
	done  chan struct{}            // the reader ended
	err   error                    // why, once done is closed
}

// startPeer runs c's reader and writer until the connection closes (in the test's cleanup at the
// latest).
func startPeer(t *testing.T, c *rawClient, pings bool) *peer {
	p := &peer{c: c, pings: pings, wake: make(chan struct{}, 1), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(p.read)  // ends when the connection closes
	wg.Go(p.write) // ends with the reader or a failed write
	t.Cleanup(func() {
		_ = c.conn.Close()
		wg.Wait()
	})
	return p
}

func (p *peer) send(ps ...*packets.ControlPacket) {
	p.mu.Lock()
	p.queue = append(p.queue, ps...)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// publishN queues n PUBLISH packets to topic at qos, packet ids 1..n (at most the server's Receive
// Maximum at QoS 2): a delivery's QoS is the lower of the publish's and the subscription's.
func (p *peer) publishN(topic string, qos byte, n int) {
	ps := make([]*packets.ControlPacket, n)
	for i := range ps {
		ps[i] = publish(uint16(i+1), qos, topic, []byte("m"))
	}
	p.send(ps...)
}

func (p *peer) read() {
	defer close(p.done)
	for {
		pk, err := packets.ReadPacket(p.c.r)
		if err != nil {
			p.err = err
			return
		}
		switch c := pk.Content.(type) {
		case *packets.Publish:
			p.got.Add(1)
			switch c.QoS {
			case 1:
				p.send(ack(packets.PUBACK, c.PacketID))
			case 2:
				p.send(ack(packets.PUBREC, c.PacketID))
			}
		case *packets.Pubrel:
			p.send(ack(packets.PUBCOMP, c.PacketID))
		case *packets.Pubrec:
			p.send(ack(packets.PUBREL, c.PacketID))
		}
	}
}

func (p *peer) write() {
	ping := packets.NewControlPacket(packets.PINGREQ)
	for {
		select {
		case <-p.wake:
		case <-p.done:
			return
		}
		p.mu.Lock()
		q := p.queue
		p.queue = nil
		p.mu.Unlock()
		if p.pings {
			q = append(q, ping, ping, ping, ping)
		}
		if p.c.write(q...) != nil {
			return
		}
	}
}

// TestEmbeddedSubscribersUnderLoad: subscribers at QoS 1 or 2 acknowledging as fast as they can while
// several publishers publish to them get every message, and the server still closes. mochi-mqtt v2.7.9
// deadlocked here (docs/mqtt.md): Inflight.NextImmediate, which it called after each packet of a client
// with messages in flight and send quota, takes the in-flight map's read lock twice, and a publisher's
// Set waiting between the two blocks both, then the whole server; without noSendQuota this test hung
// in most of its cases (the goroutines stuck in NextImmediate and Set). A stall of stallWait with nothing
// received is the hang; a slow machine only makes the run longer.
func TestEmbeddedSubscribersUnderLoad(t *testing.T) {
	const (
		subscribers = 4
		publishers  = 4
		each        = 400 // subscribers*publishers*each stays below embeddedPending: nothing is dropped
		stallWait   = 10 * time.Second
	)
	cases := []struct {
		name       string
		qos        byte
		receiveMax uint16 // the subscribers' Receive Maximum; 0 sends none
		pings      bool
	}{
		{"qos1 receive maximum 65535", 1, 65535, false},
		{"qos1 receive maximum 10 pinging", 1, 10, true},
		{"qos2 receive maximum 65535", 2, 65535, false},
		{"qos1 no receive maximum", 1, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := embeddedFor(t, 1)
			addr := e.Addrs()[0]
			var subs []*peer
			for i := range subscribers {
				c := dialRaw(t, addr, "sub"+strconv.Itoa(i), tc.receiveMax)
				c.subscribe(t, "load", tc.qos)
				subs = append(subs, startPeer(t, c, tc.pings))
			}
			received := func() (n int64) {
				for _, s := range subs {
					n += s.got.Load()
				}
				return n
			}
			for i := range publishers {
				startPeer(t, dialRaw(t, addr, "pub"+strconv.Itoa(i), 0), false).publishN("load", tc.qos, each)
			}
			want := int64(subscribers * publishers * each)
			last, seen := time.Now(), int64(-1)
			for n := received(); n < want && time.Since(last) < stallWait; n = received() {
				if n != seen {
					last, seen = time.Now(), n
				}
				for _, s := range subs {
					select {
					case <-s.done:
						t.Fatalf("a subscriber's connection ended after %d of %d messages: %v", n, want, s.err)
					default:
					}
				}
				<-time.After(20 * time.Millisecond)
			}
			if n := received(); n != want {
				t.Errorf("subscribers got %d of %d messages, nothing more for %v: the server hangs", n, want, stallWait)
			}
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestEmbeddedHoldsNothingBack: whatever Receive Maximum a subscriber announces, an embedded server
// sends it every message instead of holding some back for its send quota, which mochi released only
// from Inflight.NextImmediate, the call that deadlocks (with the quota at zero it is never made).
//
// A subscriber that acknowledges nothing got Receive Maximum messages and then waited for its next
// packet. One that acknowledges everything got, at QoS 1, a few times its Receive Maximum and then
// nothing (in two runs 2 and 5 of 20 at 1, 4 and 12 of 20 at 2, 24 and 22 of 100 at 10): a message
// NextImmediate sent was dropped from the in-flight map at once, so its PUBACK found nothing and gave
// no quota back, and with the quota at zero every further message was held for good. (At QoS 2 a PUBCOMP gives quota back whether or not it
// finds the message: that case passed.)
func TestEmbeddedHoldsNothingBack(t *testing.T) {
	cases := []struct {
		name       string
		qos        byte
		receiveMax uint16 // 0 sends none
		acks       bool
		publish    int
	}{
		{"qos1 receive maximum 1 no acks", 1, 1, false, 5},
		{"qos1 receive maximum 3 no acks", 1, 3, false, 10},
		{"qos2 receive maximum 2 no acks", 2, 2, false, 6},
		{"qos1 no receive maximum no acks", 1, 0, false, 5},
		{"qos1 receive maximum 1 acking", 1, 1, true, 20},
		{"qos1 receive maximum 2 acking", 1, 2, true, 20},
		{"qos2 receive maximum 2 acking", 2, 2, true, 20},
		{"qos1 receive maximum 10 acking", 1, 10, true, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := embeddedFor(t, 1)
			c := dialRaw(t, e.Addrs()[0], "sub", tc.receiveMax)
			c.subscribe(t, "held", tc.qos)
			var sub *peer
			if tc.acks {
				sub = startPeer(t, c, false)
			}
			startPeer(t, dialRaw(t, e.Addrs()[0], "pub", 0), false).publishN("held", tc.qos, tc.publish)
			if tc.acks {
				end := time.Now().Add(10 * time.Second)
				for sub.got.Load() < int64(tc.publish) && time.Now().Before(end) {
					select {
					case <-sub.done:
						t.Fatalf("connection ended: %v", sub.err)
					case <-time.After(20 * time.Millisecond):
					}
				}
				if n := sub.got.Load(); n != int64(tc.publish) {
					t.Errorf("got %d of %d messages, each acknowledged (Receive Maximum %d)", n, tc.publish, tc.receiveMax)
				}
				return
			}
			_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			for got := range tc.publish {
				p, err := packets.ReadPacket(c.r)
				if err != nil {
					t.Fatalf("got %d of %d messages (Receive Maximum %d), none acknowledged: %v", got, tc.publish, tc.receiveMax, err)
				}
				if m, ok := p.Content.(*packets.Publish); !ok || m.QoS != tc.qos {
					t.Fatalf("after %d messages: %v, want PUBLISH at QoS %d", got, p, tc.qos)
				}
			}
		})
	}
}
