package itest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
)

// The NATS JetStream tests run against nats-servers of scripts/nats.sh that each test starts on ports
// of its own (MQTARGET_INTEGRATION=1; the script builds the pinned nats-server once, scripts/test.sh
// does so in its downloads step).

// TestNATS: two servers, two hosts: every endpoint's ledger against /jsz, bad input, the async drain,
// a stopped and a frozen server, and /send3Host with two.
func TestNATS(t *testing.T) {
	Lane(t, "nats")
	Integration(t)
	h := NewNATS(t, 2)
	RunSuite(t, h)
	t.Run("send3Host with 2 servers", func(t *testing.T) { RunTooFewHosts(t, h, "nats.servers") })
}

// TestNATSFaults kills and freezes one server under load (JetStream's file store: the PubAck follows
// the write, so a kill -9 loses no acknowledged message).
func TestNATSFaults(t *testing.T) {
	Lane(t, "nats")
	Integration(t)
	RunFaults(t, NewNATS(t, 1))
}

func TestRoundTripNATS(t *testing.T) {
	Lane(t, "nats")
	Integration(t)
	RunRoundTrip(t, NewNATS(t, 2))
}

// TestNATSConsumer: the JetStream consumer over two servers.
func TestNATSConsumer(t *testing.T) {
	Lane(t, "nats")
	Integration(t)
	h := NewNATS(t, 2)
	cfg := nats.DefaultConfig()
	cfg.Servers = h.Addrs
	pub, err := nats.New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := nats.NewConsumer(cfg, publishers.ConsumerOptions{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	CheckConsume(t, pub, cons, FreshTopic("consume"), 300)
}

// RunTooFewHosts: with fewer than 3 hosts /send3Host answers 503 naming the broker's addresses
// setting (field), publishes nothing, and the service goes on serving.
func RunTooFewHosts(t *testing.T, h Harness, field string) {
	if n := len(h.Hosts()); n >= 3 {
		t.Skipf("%d hosts", n)
	}
	tg := StartTarget(t, h, nil)
	topic := uniqueTopic("it3")
	r := tg.Get(t, "/send3Host?topic="+topic)
	if r.Status != http.StatusServiceUnavailable || r.Field != field || !strings.Contains(r.Error, "needs 3") {
		t.Fatalf("/send3Host with %d hosts: %d field %q %q, want 503 naming %s", len(h.Hosts()), r.Status, r.Field, r.Error, field)
	}
	if r := tg.Get(t, "/send2Host?topic="+topic); r.Status != http.StatusOK {
		t.Fatalf("/send2Host after it: %d %s", r.Status, r.Error)
	}
	if got := h.Consume(t, 0, topic, 1, 20*time.Second); len(got) != 1 { // a fresh service starts at host 0
		t.Errorf("host 0 has %d messages, want the one of /send2Host", len(got))
	}
	if n := h.Stored(t, 0, topic) + h.Stored(t, 1, topic); n != 1 {
		t.Errorf("the brokers hold %d messages, want the one of /send2Host", n)
	}
}
