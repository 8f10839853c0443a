package stomp_test

import (
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// TestIntegrationConformance runs the publishers' conformance suite against the Artemis scripts/test.sh
// starts, which it freezes: it takes that broker's lane (internal/itest's tests stop and freeze it too).
func TestIntegrationConformance(t *testing.T) {
	testlane.Lock(t, "artemis")
	addr, login, pass, ctl := itest.RealBroker(t, "artemis", "ARTEMIS")
	h := &itest.STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Persistent: true, Ctl: []itest.BrokerControl{ctl}}
	f := publishertest.Features{
		// stompReceiptTimeout: a connection whose oldest receipt is 30 s late is failed.
		AsyncTimeout: 30 * time.Second,
		Rejections: []publishertest.Rejection{
			// Artemis answers ERROR AMQ229216 "Invalid queue name" to both.
			{Name: "empty destination name", Topic: "", Body: []byte("refused")},
			{Name: "fully qualified name without queue", Topic: "conformance::", Body: []byte("refused")},
		},
	}
	config := func() stomp.Config {
		c := stomp.DefaultConfig()
		c.Hosts = h.Addrs
		c.Login = h.Login
		c.Passcode = publishers.Secret(h.Passcode)
		c.Persistent = h.Persistent
		// The JVM broker shares two cores with every test package of a CI run: its CONNECTED once took
		// over the default second. The suite's publishes have opTimeout (10 s) for that.
		c.DialTimeout = 10 * time.Second
		return c
	}
	f.BadLogin = func(t testing.TB) (publishers.Publisher, error) {
		c := config()
		c.Passcode = publishers.Secret(h.Passcode + "-wrong")
		return stomp.New(c, publishertest.Logger(t))
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		p, err := stomp.New(config(), publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}
