package mqtt

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestConformance runs the conformance suite against two servers, each behind a proxy that can freeze
// it (a SIGSTOP would stop the test too), at every QoS that acknowledges: two real ones when
// MQTARGET_MQTT_TEST_SERVERS names them (scripts/test.sh starts two mosquitto), else, or with
// MQTARGET_MQTT_TEST_EMBEDDED=1, two embedded mochi-mqtt (about 11 s under -race; the ones that
// deadlocked under this suite's load before noSendQuota, embedded_quota.go).
func TestConformance(t *testing.T) {
	testlane.Lock(t, "mqtt") // the real brokers other packages stop and freeze too
	servers := strings.Split(os.Getenv("MQTARGET_MQTT_TEST_SERVERS"), ",")
	embedded := os.Getenv("MQTARGET_MQTT_TEST_EMBEDDED") == "1" || len(servers) < 2
	for _, qos := range []int{1, 2} {
		t.Run("qos"+string(rune('0'+qos)), func(t *testing.T) {
			targets := servers[:min(len(servers), 2)]
			var rejections []publishertest.Rejection // the embedded servers' ACL hook refuses denied* topics
			noReject := "mosquitto as scripts/mosquitto.sh starts it refuses nothing (no ACL); TestMisbehavingBrokers covers refusing reason codes"
			if embedded {
				targets = embeddedFor(t, 2).Addrs()
				noReject = ""
				rejections = []publishertest.Rejection{
					{Name: "not authorized", Topic: deniedPrefix + "_topic", Body: []byte("refused by the ACL")},
					// Over the packet size the server takes: it drops the connection (mochi announces no
					// Maximum Packet Size in CONNACK, so the publisher cannot refuse it first).
					{Name: "over the maximum packet size", Topic: "too_large", Body: bytes.Repeat([]byte("x"), 1<<20+MaxTopicLen+32), Kind: publishers.ErrUnavailable},
				}
			}
			var addrs []string
			b := &frozenBroker{}
			for _, a := range targets {
				px := newProxy(t, a)
				b.proxies = append(b.proxies, px)
				addrs = append(addrs, px.addr())
			}
			b.recorder = newRecorder(t, targets) // straight to the servers: a freeze stalls the publisher only
			f := publishertest.Features{
				AsyncTimeout:     maxAckWait,
				Rejections:       rejections,
				NoReject:         noReject,
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
