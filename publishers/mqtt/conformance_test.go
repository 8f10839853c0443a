package mqtt

import (
	"bytes"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestConformanceEmbedded runs the conformance suite against two embedded mochi-mqtt servers, each
// behind a proxy that can freeze it (a SIGSTOP would stop the test too), at every QoS that acknowledges.
func TestConformanceEmbedded(t *testing.T) {
	for _, qos := range []int{1, 2} {
		t.Run("qos"+string(rune('0'+qos)), func(t *testing.T) {
			e := embeddedFor(t, 2)
			var addrs []string
			b := &frozenBroker{}
			for _, a := range e.Addrs() {
				px := newProxy(t, a)
				b.proxies = append(b.proxies, px)
				addrs = append(addrs, px.addr())
			}
			b.recorder = newRecorder(t, e.Addrs()) // straight to the servers: a freeze stalls the publisher only
			f := publishertest.Features{
				AsyncTimeout: maxAckWait,
				Rejections: []publishertest.Rejection{
					{Name: "not authorized", Topic: deniedPrefix + "_topic", Body: []byte("refused by the ACL")},
					// Over the packet size the server takes: it drops the connection (mochi announces no
					// Maximum Packet Size in CONNACK, so the publisher cannot refuse it first).
					{Name: "over the maximum packet size", Topic: "too_large", Body: bytes.Repeat([]byte("x"), 1<<20+MaxTopicLen+32), Kind: publishers.ErrUnavailable},
				},
				IgnoreGoroutines: mochiGoroutines(),
			}
			publishertest.Run(t, f, b, func(t testing.TB) publishers.Publisher {
				c := DefaultConfig()
				c.Servers = addrs
				c.QoS = qos
				c.KeepAlive = 2 * time.Second // a frozen broker's connection is dropped within about 2 keep alives
				p, err := New(c, publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}
