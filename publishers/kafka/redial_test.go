package kafka_test

import (
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/kafka"
	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// flapNode makes a publisher whose cluster has one broker, advertised at addr (the test's flap
// server): the bootstrap is an honest fake, so New discovers the cluster, and every connection to the
// node meets addr's server. relay is the fake's address, for a server that behaves again to relay to.
func flapNode(t *testing.T, addr string, log *slog.Logger) (p *kafka.Publisher, relay string) {
	t.Helper()
	f := startFake(t, pt.Honest)
	f.advertised.Store(&addr)
	c := kafka.DefaultConfig()
	c.Brokers = []string{f.addr()}
	p, err := kafka.New(c, log)
	if err != nil {
		t.Fatal(err)
	}
	return p, f.addr()
}

// relayTo copies a connection to and from the broker at addr.
func relayTo(addr string, c net.Conn) {
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
}

// TestPingBounded: publishertest.RunPingBounded against a broker that accepts every connection and
// closes it at once: /readyz's pings (an ApiVersions request each) share one connection per host and
// publishers.PingReuse.
func TestPingBounded(t *testing.T) {
	pt.RunPingBounded(t, []pt.PingCase{
		{Name: "accepts and closes", Serve: func(net.Conn) {}, Pub: func(t *testing.T, addr string) pt.Pinger {
			p, _ := flapNode(t, addr, pt.Logger(t))
			return p
		}, Pool: false},
	})
}

// TestRedialBounded: publishertest.RunRedialBounded against a node that accepts and closes (then
// relays to an honest fake once it behaves) or refuses. Slots 3: franz-go keeps a produce connection
// and a connection for other requests per broker, and may redial one as it opens; its own retry
// backoff, not publishers.Backoff, paces the redials, and stays well under ShortBackoff's bound.
func TestRedialBounded(t *testing.T) {
	var relay string
	pt.RunRedialBounded(t, []pt.RedialCase{
		{Name: "accepts and closes", Pub: func(t *testing.T, addr string, log *slog.Logger) pt.Redialer {
			p, r := flapNode(t, addr, log)
			relay = r
			return p
		}, Serve: func(net.Conn) {}, Good: func(c net.Conn) { relayTo(relay, c) }, Slots: 3, Answered: false, Probes: 0},
		{Name: "refuses", Pub: func(t *testing.T, addr string, log *slog.Logger) pt.Redialer {
			p, _ := flapNode(t, addr, log)
			return p
		}, Serve: nil, Good: nil, Slots: 3, Answered: false, Probes: 0},
	})
}
