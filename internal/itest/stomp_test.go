package itest

import (
	"log/slog"
	"testing"

	"github.com/mqtarget/mqtarget/config"

	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// TestEmbeddedSTOMP runs the suite against the embedded default: mqtarget with no stomp.hosts starts
// three go-stomp servers, distinct brokers, so /send2Host and /send3Host are checked per host.
func TestEmbeddedSTOMP(t *testing.T) {
	tg := StartTarget(t, nil, func(c *config.Config) { c.Broker = "stomp" })
	addrs := embeddedSTOMP(tg)
	if len(addrs) != 3 {
		t.Fatalf("embedded STOMP servers: %d, want 3", len(addrs))
	}
	h := &STOMP{Addrs: addrs}
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })
	t.Run("bad input", func(t *testing.T) { RunBadInput(t, h) })
	t.Run("shutdown drains async", func(t *testing.T) { RunShutdownDrains(t, h) })
}

// One real broker is one host: /send2Host and /send3Host need distinct brokers per host (a consumer
// of host i's queue must see only what went through host i), so the suite skips them here and
// TestSTOMPMixed covers them across Artemis, ActiveMQ Classic and a go-stomp server.

func TestArtemis(t *testing.T) {
	Lane(t, "artemis")
	addr, login, pass, ctl := RealBroker(t, "artemis", "ARTEMIS")
	h := &STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Persistent: true, Ctl: []BrokerControl{ctl}}
	RunSuite(t, h)
}

func TestActiveMQ(t *testing.T) {
	Lane(t, "activemq")
	addr, login, pass, ctl := RealBroker(t, "activemq", "ACTIVEMQ")
	h := &STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Ctl: []BrokerControl{ctl}}
	RunSuite(t, h)
}

// TestRabbitMQ runs the suite against RabbitMQ's STOMP plugin (scripts/rabbitmq.sh). RabbitMQ takes
// CONNECT's host header as the virtual host, so mqtarget and the harness send "/"; a SEND to /queue/NAME
// declares the durable queue NAME, and persistent:true stores the messages on disk.
func TestRabbitMQ(t *testing.T) {
	Lane(t, "rabbitmq")
	addr, login, pass, ctl := RealBroker(t, "rabbitmq", "RABBITMQ")
	h := &STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Persistent: true, VHost: "/",
		Ctl: []BrokerControl{ctl}}
	RunSuite(t, h)
}

// TestSTOMPMixed points mqtarget at three distinct brokers, [Artemis, ActiveMQ Classic, go-stomp], so
// the round-robin endpoints are checked per host against real brokers. mqtarget has one STOMP login,
// so scripts/test.sh starts both brokers with the same credentials; the go-stomp server takes any.
func TestSTOMPMixed(t *testing.T) {
	Lane(t, "artemis", "activemq")
	art, login, pass, _ := RealBroker(t, "artemis", "ARTEMIS")
	amq, login2, pass2, _ := RealBroker(t, "activemq", "ACTIVEMQ")
	if login != login2 || pass != pass2 {
		t.Skip("Artemis and ActiveMQ have different logins; scripts/test.sh starts them with one")
	}
	srv, err := stomp.StartServer(1, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h := &STOMP{Addrs: []string{art, amq, srv.Addrs()[0]}, Login: login, Passcode: pass}
	RunDelivery(t, h)
}

// embeddedSTOMP is the embedded go-stomp servers' addresses (nil when the STOMP brokers are external).
func embeddedSTOMP(tg *Target) []string {
	if e := tg.App.Embedded("stomp"); e != nil {
		return e.Addrs
	}
	return nil
}
