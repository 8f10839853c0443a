package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestIntegrationTLS: against mosquitto's TLS listener (scripts/mosquitto.sh with MOSQUITTO_TLS_PORT:
// MQTARGET_MQTT_TEST_TLS_SERVER its address, MQTARGET_MQTT_TEST_TLS_CA the script's CA; the broker of
// the first of MQTARGET_MQTT_TEST_SERVERS), at MQTT 5 and 3.1.1: what Publish, PublishBatch and
// PublishAsync acknowledge over TLS is exactly what mosquitto_sub receives on the same broker's plain
// listener; with the system's roots, or against the plain listener, the publish is refused as
// unavailable within dial_timeout. TestTLS asks the same of a fake broker, with more settings.
func TestIntegrationTLS(t *testing.T) {
	testlane.Lock(t, "mqtt") // the real brokers other packages stop and freeze too
	plain := realServers(t)[0]
	addr, ca := os.Getenv("MQTARGET_MQTT_TEST_TLS_SERVER"), os.Getenv("MQTARGET_MQTT_TEST_TLS_CA")
	if addr == "" || ca == "" {
		t.Skip("MQTARGET_MQTT_TEST_TLS_SERVER and MQTARGET_MQTT_TEST_TLS_CA are not set (scripts/mosquitto.sh with MOSQUITTO_TLS_PORT makes a TLS listener)")
	}
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) {
			var r [6]byte
			_, _ = rand.Read(r[:])
			topic := "mqtarget_tls_" + hex.EncodeToString(r[:])
			sub := startSub(t, plain, topic)
			c := DefaultConfig()
			c.Servers, c.Version = []string{addr}, v
			c.TLSConfig = publishers.TLSConfig{Enabled: true, CAFile: ca}
			p, err := New(c, discard())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var acked [][]byte
			seq := 0
			body := func() []byte { seq++; return fmt.Appendf(nil, "mqtarget-tls %s %d", topic, seq) }
			for range 3 {
				b := body()
				if err := p.Publish(ctx, 0, topic, b); err != nil {
					t.Fatalf("Publish over TLS: %v", err)
				}
				acked = append(acked, b)
			}
			batch := [][]byte{body(), body()}
			if err := p.PublishBatch(ctx, 0, topic, batch); err != nil {
				t.Fatalf("PublishBatch over TLS: %v", err)
			}
			acked = append(acked, batch...)
			b := body()
			if err := publishertest.AsyncResult(p, 0, topic, b, 10*time.Second); err != nil {
				t.Fatalf("PublishAsync over TLS: %v", err)
			}
			acked = append(acked, b)
			if got := sub.wait(len(acked), 15*time.Second); !sameSet(got, acked) {
				t.Errorf("mosquitto_sub got %d messages, %d acknowledged over TLS (duplicates, strays or loss)", len(got), len(acked))
			}
			// The version is the retained $SYS PUBLISH answering watch's SUBSCRIBE, which races the
			// publishes above on the same connection: it may come after their acknowledgements.
			testwait.Until(t, 5*time.Second, "mosquitto's version over TLS", func() error {
				if bv := p.BrokerVersion(0); !strings.Contains(bv, "mosquitto") {
					return fmt.Errorf("BrokerVersion = %q", bv)
				}
				return nil
			})

			for _, tc := range []struct {
				name, addr string
				tls        publishers.TLSConfig
			}{
				{"the system's roots", addr, publishers.TLSConfig{Enabled: true}},
				{"TLS to the plain listener", plain, publishers.TLSConfig{Enabled: true, CAFile: ca}},
			} {
				c := DefaultConfig()
				c.Servers, c.Version, c.TLSConfig, c.DialTimeout = []string{tc.addr}, v, tc.tls, time.Second
				p, err := New(c, discard())
				if err != nil {
					t.Fatal(err)
				}
				publishertest.RefusedWithin(t, tc.name, 5*time.Second, func() error { return p.Publish(ctx, 0, topic, []byte("refused")) })
				_ = p.Close()
			}
			if got := sub.wait(len(acked), time.Second); len(got) != len(acked) {
				t.Errorf("mosquitto_sub got %d messages after the refused publishes, want the %d acknowledged", len(got), len(acked))
			}
		})
	}
}
