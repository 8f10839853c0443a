package publishers_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/internal/embedded"
	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
)

func stompPair(t *testing.T, cfg publishers.STOMPConfig) (publishers.Publisher, publishers.Consumer) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	pub, err := publishers.NewSTOMP(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := publishers.NewSTOMPConsumer(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	return pub, cons
}

// TestSTOMPConsumerEmbedded runs against two embedded go-stomp servers.
func TestSTOMPConsumerEmbedded(t *testing.T) {
	e, err := embedded.StartSTOMP(2, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	cfg := publishers.DefaultSTOMPConfig()
	cfg.Hosts = e.Addrs()
	pub, cons := stompPair(t, cfg)
	itest.CheckConsume(t, pub, cons, itest.FreshTopic("consume"), 200)
}

// TestSTOMPConsumerReconnects cuts the consumer's connection to an embedded go-stomp server.
func TestSTOMPConsumerReconnects(t *testing.T) {
	e, err := embedded.StartSTOMP(1, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	p := newCutProxy(t, e.Addrs()[0])
	cfg := publishers.DefaultSTOMPConfig()
	cfg.Hosts = e.Addrs()
	pub, _ := stompPair(t, cfg)
	cfg.Hosts = []string{p.addr()}
	_, cons := stompPair(t, cfg)
	checkReconnect(t, pub, cons, p, itest.FreshTopic("reconnect"))
}

func TestSTOMPConsumerUnreachable(t *testing.T) {
	cfg := publishers.DefaultSTOMPConfig()
	cfg.Hosts = []string{"127.0.0.1:1"}
	cons, err := publishers.NewSTOMPConsumer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	err = cons.Consume(t.Context(), "t", func(publishers.Delivery) {})
	if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "stomp.hosts[0]") {
		t.Fatalf("Consume from an unreachable broker: %v, want ErrUnavailable naming stomp.hosts[0]", err)
	}
}
