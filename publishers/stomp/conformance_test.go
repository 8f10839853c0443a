package stomp_test

import (
	"log/slog"
	"testing"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// The fakes: brokers in the test process that misbehave on purpose (publishertest.Misbehaviours).
// Against each, no publisher acknowledges what the fake did not store.

// The conformance suite against a real broker (Artemis) is TestIntegrationConformance
// (integration_test.go).

// TestConformanceEmbeddedSTOMP runs the suite against the embedded go-stomp servers (no integration
// environment needed: they run in the test process).
func TestConformanceEmbeddedSTOMP(t *testing.T) {
	srv, err := stomp.StartServer(2, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h := &itest.STOMP{Addrs: srv.Addrs()}
	f := publishertest.Features{
		NoFreeze: "the go-stomp server runs in the test process, a SIGSTOP would stop the test too " +
			"(the suite's own test stalls it through a proxy)",
		NoReject: "go-stomp v3.1.3 accepts every SEND; it answers ERROR only to protocol and transaction misuse, " +
			"which the Publisher interface cannot produce",
		NoLogin:          "the embedded go-stomp server takes any login (TestIntegrationConformance's Artemis refuses one)",
		IgnoreGoroutines: stomp.EmbeddedGoroutines(),
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		c := stomp.DefaultConfig()
		c.Hosts = h.Addrs
		p, err := stomp.New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// fakeTarget is the publisher against the fake STOMP broker.
func fakeTarget() publishertest.FakeTarget {
	return publishertest.FakeTarget{Broker: stomp.Broker.Name, Fake: startFake, Open: func(addrs []string, log *slog.Logger) (publishers.Publisher, error) {
		c := stomp.DefaultConfig()
		c.Hosts = addrs
		return stomp.New(c, log)
	}}
}

func TestFakes(t *testing.T) { publishertest.RunFakeTarget(t, fakeTarget()) }

func TestProtocolErrorsCountedAndLoggedOnce(t *testing.T) {
	publishertest.RunProtocolErrors(t, fakeTarget())
}

// TestSlowDial: stomp.connections_per_host (2) connections at most.
func TestSlowDial(t *testing.T) { publishertest.RunSlowDialTarget(t, fakeTarget(), 2) }
