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

func nsqPair(t *testing.T, hosts []string) (publishers.Publisher, publishers.Consumer) {
	t.Helper()
	cfg := publishers.DefaultNSQConfig()
	cfg.Hosts = hosts
	log := slog.New(slog.DiscardHandler)
	pub, err := publishers.NewNSQ(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := publishers.NewNSQConsumer(cfg, publishers.ConsumerOptions{}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	return pub, cons
}

// TestNSQConsumerEmbedded runs against two in-process nsqd instances.
func TestNSQConsumerEmbedded(t *testing.T) {
	e, err := embedded.StartNSQD(2, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	pub, cons := nsqPair(t, e.TCPAddrs())
	itest.CheckConsume(t, pub, cons, itest.FreshTopic("consume"), 200)
}

// TestNSQConsumerReconnects cuts the consumer's connection to an in-process nsqd.
func TestNSQConsumerReconnects(t *testing.T) {
	e, err := embedded.StartNSQD(1, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	p := newCutProxy(t, e.TCPAddrs()[0])
	pub, _ := nsqPair(t, e.TCPAddrs())
	_, cons := nsqPair(t, []string{p.addr()})
	checkReconnect(t, pub, cons, p, itest.FreshTopic("reconnect"))
}

func TestNSQConsumerUnreachable(t *testing.T) {
	cfg := publishers.DefaultNSQConfig()
	cfg.Hosts = []string{"127.0.0.1:1"}
	cons, err := publishers.NewNSQConsumer(cfg, publishers.ConsumerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	err = cons.Consume(t.Context(), "t", func(publishers.Delivery) {})
	if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "nsq.hosts[0]") {
		t.Fatalf("Consume from an unreachable nsqd: %v, want ErrUnavailable naming nsq.hosts[0]", err)
	}
}
