package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// mosquittoDenied is under the topic filter scripts/mosquitto.sh's ACL denies every client
// (MOSQUITTO_DENIED, default mqt-denied/#).
const mosquittoDenied = "mqt-denied/"

// TestIntegrationNotAuthorized: a publish mosquitto's ACL denies. mosquitto 2.0.11 answers it and
// then closes the connection, at either version (MQTT 3.1.1 allows a server only an acknowledgement or
// a close; it does both). At MQTT 5 its PUBACK or PUBREC refuses it (0x87, not authorized): Publish
// and PublishAsync are rejected (502) naming it, at QoS 1 and 2, or unavailable when paho handles the
// close before the answer (seen at QoS 2), and a PublishBatch, whose second message meets the closed
// connection, is rejected or unavailable: never a success, and at least one names 0x87. At 3.1.1, which
// has no reason codes, the acknowledgement is all mqtarget hears: at QoS 1 it answers 200 for a message
// mosquitto dropped (docs/mqtt.md says so), or 503 when paho.mqtt.golang handles the close before the
// PUBACK; at QoS 2 the PUBCOMP never comes, so the publish is unavailable (503, never a 200). Each
// connection so lost had answered, so the host redials at once (publishers.Backoff's churn), and
// mosquitto_sub on a permitted topic gets exactly what was acknowledged there.
func TestIntegrationNotAuthorized(t *testing.T) {
	testlane.Lock(t, "mqtt") // the real brokers other packages stop and freeze too
	addr := realServers(t)[0]
	for _, v := range []string{"5", version311} {
		for _, qos := range []int{1, 2} {
			t.Run(fmt.Sprintf("v%s/qos %d", v, qos), func(t *testing.T) {
				var r [6]byte
				_, _ = rand.Read(r[:])
				denied, allowed := mosquittoDenied+hex.EncodeToString(r[:]), "mqtarget_allowed_"+hex.EncodeToString(r[:])
				sub := startSub(t, addr, allowed)
				c := DefaultConfig()
				c.Servers, c.Version, c.QoS = []string{addr}, v, qos
				p, err := New(c, discard())
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = p.Close() }()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var acked [][]byte // on the permitted topic
				refusals := 0      // answered 0x87
				// live publishes to the permitted topic until one is acknowledged: the connection a
				// refusal ended may still be noticed, or redialled, meanwhile (503, nothing sent)
				live := func(what string) {
					t.Helper()
					body := fmt.Appendf(nil, "allowed %d", len(acked))
					testwait.Until(t, 5*time.Second, "a publish to "+allowed+" "+what, func() error {
						err := p.Publish(ctx, 0, allowed, body)
						if err != nil && !errors.Is(err, publishers.ErrUnavailable) {
							t.Fatalf("Publish to %s %s: %v, want success or 503 until the redial", allowed, what, err)
						}
						return err
					})
					acked = append(acked, body)
				}
				for _, tc := range publishertest.Ways(ctx, p, 0, denied, 10*time.Second) {
					live("before " + tc.Name)
					err := tc.Publish()
					refused := errors.Is(err, publishers.ErrRejected) && strings.Contains(err.Error(), "0x87")
					lost := errors.Is(err, publishers.ErrUnavailable)
					switch {
					case v == "5" && !refused && !lost:
						t.Errorf("%s to %s: %v, want rejected with reason 0x87 or, when the close came first, unavailable", tc.Name, denied, err)
					case v == version311 && qos == 1 && err != nil && !lost:
						t.Errorf("%s to %s at 3.1.1, QoS 1: %v, want success (mosquitto 2.0.11 acknowledges what its ACL drops) or unavailable (its close came first)", tc.Name, denied, err)
					case v == version311 && qos == 2 && !lost:
						t.Errorf("%s to %s at 3.1.1, QoS 2: %v, want unavailable (mosquitto 2.0.11 answers PUBREC and closes the connection before PUBCOMP)", tc.Name, denied, err)
					default:
						t.Logf("%s: %v", tc.Name, err)
					}
					if refused {
						refusals++
					}
				}
				if v == "5" && refusals == 0 {
					t.Errorf("no publish to %s was refused with reason 0x87 (scripts/mosquitto.sh's ACL denies %s#: a mosquitto started before the script made its ACL needs a restart)", denied, mosquittoDenied)
				}
				live("after the refusals")
				if got := sub.wait(len(acked), 10*time.Second); !sameSet(got, acked) {
					t.Errorf("mosquitto_sub on %s got %q, want the %d acknowledged", allowed, got, len(acked))
				}
			})
		}
	}
}
