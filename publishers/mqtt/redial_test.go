package mqtt

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// brokerThen is a FlapServer's serve function: CONNECT answered by a successful CONNACK in version's
// codec, then then.
func brokerThen(version string, then func(fakeCodec, net.Conn)) func(net.Conn) {
	var codec fakeCodec = codec5{}
	if version == version311 {
		codec = codec311{}
	}
	return func(c net.Conn) {
		if codec.readConnect(c) != nil || codec.connack(c, false) != nil {
			return
		}
		then(codec, c)
	}
}

// answerOneThenClose acknowledges the first PUBLISH and closes the connection.
func answerOneThenClose(codec fakeCodec, c net.Conn) {
	for {
		p, err := codec.read(c)
		if err != nil {
			return
		}
		if p.typ == typePublish {
			_ = codec.write(c, typePuback, p.id, 0)
			return
		}
	}
}

// answerOneThenCloseAfter acknowledges the first PUBLISH and closes the connection once the client
// sent nothing more for 50 ms: the client has handled the PUBACK by then (closed at once, the close
// may reach paho.mqtt.golang first, and the PUBACK is lost with the connection).
func answerOneThenCloseAfter(codec fakeCodec, c net.Conn) {
	for {
		p, err := codec.read(c)
		if err != nil {
			return
		}
		if p.typ == typeSubscribe { // the version's $SYS topic: none here
			_ = codec.write(c, typeSuback, p.id, 0x80)
		}
		if p.typ == typePublish {
			_ = codec.write(c, typePuback, p.id, 0)
			for c.SetReadDeadline(time.Now().Add(50*time.Millisecond)) == nil {
				if _, err := codec.read(c); err != nil {
					return
				}
			}
			return
		}
	}
}

// behaveOn serves c as a correct broker would.
func behaveOn(version string) func(net.Conn) {
	return func(c net.Conn) {
		f := &fakeBroker{m: behave, codec: codec5{}}
		if version == version311 {
			f.codec = codec311{}
		}
		f.serve(c, false)
	}
}

// TestRedialBounded: publishertest.RunRedialBounded at MQTT 5 and 3.1.1, the host's backoff shortened
// to publishertest.ShortBackoff: against brokers failing every connection, the dials stay under the
// backoff and the log holds a few lines, and publishing works once the broker behaves.
func TestRedialBounded(t *testing.T) {
	for _, v := range []string{"5", version311} {
		pub := func(t *testing.T, addr string, log *slog.Logger) publishertest.Redialer {
			c := DefaultConfig()
			c.Servers, c.Version = []string{addr}, v
			p, err := New(c, log)
			if err != nil {
				t.Fatal(err)
			}
			p.hosts[0].rd.b = publishertest.ShortBackoff
			return p
		}
		t.Run("v"+v, func(t *testing.T) {
			publishertest.RunRedialBounded(t, []publishertest.RedialCase{
				{Name: "closes after CONNACK", Pub: pub, Serve: brokerThen(v, func(fakeCodec, net.Conn) {}), Good: behaveOn(v), Slots: 1},
				{Name: "answers one PUBLISH and closes", Pub: pub, Serve: brokerThen(v, answerOneThenClose), Good: behaveOn(v), Slots: 1, Answered: true},
				{Name: "refuses", Pub: pub, Slots: 1},
			})
		})
	}
}

// TestPingBounded: publishertest.RunPingBounded at MQTT 5 and 3.1.1: /readyz's pings make at most one
// connection per host and publishers.PingReuse (the first Ping makes the publishing connection).
func TestPingBounded(t *testing.T) {
	for _, v := range []string{"5", version311} {
		publishertest.RunPingBounded(t, []publishertest.PingCase{{
			Name:  "v" + v,
			Serve: brokerThen(v, func(fakeCodec, net.Conn) {}),
			Pub: func(t *testing.T, addr string) publishertest.Pinger {
				c := DefaultConfig()
				c.Servers, c.Version = []string{addr}, v
				p, err := New(c, discard())
				if err != nil {
					t.Fatal(err)
				}
				return p
			},
			Pool: true,
		}})
	}
}

// flapPublisher is a version v publisher of a FlapServer serving then after the handshake, edited by
// edit when not nil, and a 10 s context for its calls; both end with the test.
func flapPublisher(t *testing.T, v string, then func(fakeCodec, net.Conn), edit func(*Config)) (*Publisher, context.Context) {
	t.Helper()
	srv := publishertest.StartFlapServer(t, brokerThen(v, then), behaveOn(v))
	c := DefaultConfig()
	c.Servers, c.Version = []string{srv.Addr()}, v
	if edit != nil {
		edit(&c)
	}
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return p, ctx
}

// TestChurnRedialledAtOnce: a broker that answers one PUBLISH per connection and then closes it
// (mosquitto 2.0 closes the connection after each publish its ACL denies) has its host redialled at
// once after each loss, up to the redial policy's burst (publishers.Backoff.ChurnBurst, 5 by
// default): the publish after each loss goes through on a new connection, not a 503 for a backoff.
func TestChurnRedialledAtOnce(t *testing.T) {
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) {
			p, ctx := flapPublisher(t, v, answerOneThenCloseAfter, nil)
			h := p.hosts[0]
			for i := range 5 {
				lost := h.lost.Load()
				if err := p.Publish(ctx, 0, "churn", []byte("x")); err != nil {
					t.Fatalf("publish %d, each on a connection of its own: %v", i, err)
				}
				testwait.Until(t, 5*time.Second, "the connection's loss noticed", func() error {
					if h.lost.Load() == lost {
						return errors.New("still connected")
					}
					return nil
				})
			}
		})
	}
}

// TestLossBeforeSUBACKNoticed: a connection that ends while the version's $SYS SUBSCRIBE waits for its
// SUBACK is noticed as lost at once, not when that subscribe's dial_timeout ends (paho.golang's
// Subscribe does not return when the connection ends): its publishes go to the next connection.
func TestLossBeforeSUBACKNoticed(t *testing.T) {
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) {
			closeAtSubscribe := func(codec fakeCodec, c net.Conn) {
				for {
					p, err := codec.read(c)
					if err != nil || p.typ == typeSubscribe {
						return // closed with the SUBSCRIBE unanswered
					}
				}
			}
			p, ctx := flapPublisher(t, v, closeAtSubscribe, func(c *Config) {
				c.DialTimeout = 30 * time.Second // far past testwait's bound below
			})
			h := p.hosts[0]
			// Ping makes the publishing connection (CONNACK answered). The fake closes it at the $SYS
			// SUBSCRIBE sent right after, so Ping may already see it lost: only that error is right.
			if err := p.Ping(ctx, 0); err != nil && (!errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "connection lost")) {
				t.Fatalf("Ping: %v, want nil or the connection's loss", err)
			}
			testwait.Until(t, 5*time.Second, "the connection's loss noticed", func() error {
				if h.lost.Load() == 0 {
					return errors.New("not yet")
				}
				return nil
			})
		})
	}
}
