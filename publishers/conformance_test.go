package publishers_test

import (
	"log/slog"
	"testing"

	"github.com/mqtarget/mqtarget/internal/embedded"
	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// The conformance suite against the real brokers (nsqd processes, Artemis, RocketMQ) runs in
// internal/itest/conformance_test.go, serialised with the other tests that stop and freeze them.

// TestConformanceEmbeddedSTOMP runs the suite against the embedded go-stomp servers (no integration
// environment needed: they run in the test process).
func TestConformanceEmbeddedSTOMP(t *testing.T) {
	srv, err := embedded.StartSTOMP(2, 64<<20, slog.New(slog.DiscardHandler))
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
		IgnoreGoroutines: publishertest.GoSTOMPServer(),
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		c := publishers.DefaultSTOMPConfig()
		c.Hosts = h.Addrs
		p, err := publishers.NewSTOMP(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}
