package mqtt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestConformance runs the conformance suite against two real servers, MQTARGET_MQTT_TEST_SERVERS
// (scripts/test.sh starts two mosquitto), each behind a proxy that can freeze it (a SIGSTOP would
// stop the test too), at every QoS that acknowledges and both versions, MQTT 5 (paho.golang) and
// 3.1.1 (paho.mqtt.golang).
func TestConformance(t *testing.T) {
	servers := strings.Split(os.Getenv("MQTARGET_MQTT_TEST_SERVERS"), ",")
	if len(servers) < 2 {
		t.Skip("MQTARGET_MQTT_TEST_SERVERS names no two servers (TestConformanceEmbedded runs the suite against the embedded ones)")
	}
	testlane.Lock(t, "mqtt") // the real brokers other packages stop and freeze too
	conformance(t, servers[:2], false)
}

// TestConformanceEmbedded runs the same suite against two embedded mochi-mqtt servers, always: the
// servers `-embedded_brokers mqtt` starts, which deadlocked under this suite's load before noSendQuota
// (embedded_quota.go). About 11 s under -race.
func TestConformanceEmbedded(t *testing.T) { conformance(t, nil, true) }

func conformance(t *testing.T, servers []string, embedded bool) {
	for _, tc := range versionsQoS() {
		t.Run(tc.name, func(t *testing.T) {
			qos := tc.qos
			targets := servers
			var rejections []publishertest.Rejection // the embedded servers' ACL hook refuses denied* topics
			noReject := "mosquitto as scripts/mosquitto.sh starts it refuses nothing (no ACL); TestMisbehavingBrokers covers refusing reason codes"
			if embedded {
				targets = embeddedFor(t, 2).Addrs()
				noReject = ""
				var denied error // MQTT 5: PUBACK reason 0x87, ErrRejected
				if tc.version == version311 {
					denied = publishers.ErrUnavailable // no reason codes: mochi closes the connection
				}
				rejections = []publishertest.Rejection{
					{Name: "not authorized", Topic: deniedPrefix + "_topic", Body: []byte("refused by the ACL"), Kind: denied},
					// Over the packet size the server takes: it drops the connection (mochi announces no
					// Maximum Packet Size in CONNACK, so the publisher cannot refuse it first).
					{Name: "over the maximum packet size", Topic: "too_large", Body: bytes.Repeat([]byte("x"), 1<<20+MaxTopicLen+32), Kind: publishers.ErrUnavailable},
				}
			}
			var addrs []string
			b := &frozenBroker{}
			for _, a := range targets {
				px := publishertest.StartStallProxy(t, a, 0)
				b.proxies = append(b.proxies, px)
				addrs = append(addrs, px.Addr())
			}
			b.recorder = newRecorder(t, targets) // straight to the servers: a freeze stalls the publisher only
			f := publishertest.Features{
				AsyncTimeout:     maxAckWait,
				Rejections:       rejections,
				NoReject:         noReject,
				IgnoreGoroutines: mochiGoroutines(),
			}
			config := func() Config {
				c := DefaultConfig()
				c.Servers = addrs
				c.QoS = qos
				c.Version = tc.version
				c.KeepAlive = 2 * time.Second // a frozen broker's connection is dropped within about 2 keep alives
				return c
			}
			if embedded {
				f.BadLogin = func(t testing.TB) (publishers.Publisher, error) {
					c := config()
					c.User, c.PasswordFile = refusedUser, filepath.Join(t.TempDir(), "password")
					if err := os.WriteFile(c.PasswordFile, []byte("any\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					return New(c, publishertest.Logger(t))
				}
			} else {
				f.NoLogin = "mosquitto as scripts/mosquitto.sh starts it takes anonymous clients; TestConformanceEmbedded refuses a login"
			}
			publishertest.Run(t, f, b, func(t testing.TB) publishers.Publisher {
				p, err := New(config(), publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}

// versionQoS is one protocol version and QoS the real-broker tests run at.
type versionQoS struct {
	name, version string
	qos           int
}

// versionsQoS are the versions and acknowledged QoS levels the real-broker tests cover.
func versionsQoS() []versionQoS {
	var out []versionQoS
	for _, v := range []string{"5", version311} {
		for _, q := range []int{1, 2} {
			name := fmt.Sprintf("qos%d", q)
			if v != "5" {
				name = fmt.Sprintf("v%s_qos%d", v, q)
			}
			out = append(out, versionQoS{name: name, version: v, qos: q})
		}
	}
	return out
}
