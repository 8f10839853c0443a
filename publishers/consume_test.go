package publishers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// embeddedBroker is a broker family with in-process servers, for the consumer tests that need no
// external broker (the real brokers' are in internal/itest).
type embeddedBroker struct {
	name  string
	start func(t *testing.T, n int) []string // starts n servers, stopped at cleanup; returns their addresses
	// pair returns a publisher and a consumer for hosts, closed at cleanup
	pair func(t *testing.T, hosts []string) (publishers.Publisher, publishers.Consumer)
}

var embeddedBrokers = []embeddedBroker{
	{
		name: "nsq",
		start: func(t *testing.T, n int) []string {
			e, err := nsq.StartNSQD(n, 1<<20, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			return e.TCPAddrs()
		},
		pair: func(t *testing.T, hosts []string) (publishers.Publisher, publishers.Consumer) {
			cfg := nsq.DefaultConfig()
			cfg.Hosts = hosts
			pub, err := nsq.New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			cons, err := nsq.NewConsumer(cfg, publishers.ConsumerOptions{}, nil)
			return closeAtCleanup(t, pub, cons, err)
		},
	},
	{
		name: "stomp",
		start: func(t *testing.T, n int) []string {
			e, err := stomp.StartServer(n, 64<<20, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			return e.Addrs()
		},
		pair: func(t *testing.T, hosts []string) (publishers.Publisher, publishers.Consumer) {
			cfg := stomp.DefaultConfig()
			cfg.Hosts = hosts
			pub, err := stomp.New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			cons, err := stomp.NewConsumer(cfg, nil)
			return closeAtCleanup(t, pub, cons, err)
		},
	},
}

func closeAtCleanup(t *testing.T, pub publishers.Publisher, cons publishers.Consumer, err error) (publishers.Publisher, publishers.Consumer) {
	t.Helper()
	t.Cleanup(func() { pub.Close() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	return pub, cons
}

// TestConsumerEmbedded: two in-process servers; every message published comes back once, from its host.
func TestConsumerEmbedded(t *testing.T) {
	for _, b := range embeddedBrokers {
		t.Run(b.name, func(t *testing.T) {
			pub, cons := b.pair(t, b.start(t, 2))
			itest.CheckConsume(t, pub, cons, itest.FreshTopic("consume"), 200)
		})
	}
}

// TestConsumerReconnects cuts the consumer's connection to an in-process server.
func TestConsumerReconnects(t *testing.T) {
	for _, b := range embeddedBrokers {
		t.Run(b.name, func(t *testing.T) {
			addrs := b.start(t, 1)
			p := newCutProxy(t, addrs[0])
			pub, _ := b.pair(t, addrs)
			_, cons := b.pair(t, []string{p.addr()})
			checkReconnect(t, pub, cons, p, itest.FreshTopic("reconnect"))
		})
	}
}

// TestConsumerUnreachable: a host that refuses connections fails Consume at once, naming the host's
// setting.
func TestConsumerUnreachable(t *testing.T) {
	for _, b := range embeddedBrokers {
		t.Run(b.name, func(t *testing.T) {
			_, cons := b.pair(t, []string{"127.0.0.1:1"})
			err := cons.Consume(t.Context(), "t", func(publishers.Delivery) {})
			if want := b.name + ".hosts[0]"; !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Consume from an unreachable host: %v, want ErrUnavailable naming %s", err, want)
			}
		})
	}
}

// TestConsumerBadTopic: a topic the broker would refuse is ErrBadTopic, before any connection.
func TestConsumerBadTopic(t *testing.T) {
	for _, b := range embeddedBrokers {
		t.Run(b.name, func(t *testing.T) {
			_, cons := b.pair(t, []string{"127.0.0.1:1"})
			if err := cons.Consume(t.Context(), "", func(publishers.Delivery) {}); !errors.Is(err, publishers.ErrBadTopic) {
				t.Fatalf("Consume of an empty topic: %v, want ErrBadTopic", err)
			}
		})
	}
}

// cutProxy forwards TCP connections to a broker and can cut them all, as a broker restart or a network
// failure would, while staying reachable for reconnects.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		l.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) accept() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(out, in); out.Close() })
		p.wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
	}
}

// cut closes every connection made so far.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// checkReconnect consumes topic through a proxy that cuts the consumer's connections, and requires the
// messages published after the cut to arrive: Consume re-establishes a broken subscription by itself.
func checkReconnect(t *testing.T, pub publishers.Publisher, cons publishers.Consumer, p *cutProxy, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := message.NewSource()
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Consume(ctx, topic, func(d publishers.Delivery) {
			if id, _, err := message.Parse(d.Body); err == nil {
				mu.Lock()
				seen[id] = true
				mu.Unlock()
			}
		})
	}()
	// roundTrip publishes a message and waits until it arrived, publishing another every 500 ms: one
	// sent while the broker has not noticed the cut yet may go to the dead subscription (ack:auto).
	roundTrip := func(what string) {
		t.Helper()
		var ids []string
		for {
			id := src.NextID()
			ids = append(ids, message.FormatID(id))
			if err := pub.Publish(ctx, 0, topic, src.Build(id, 64)); err != nil {
				t.Fatalf("publish %s: %v", what, err)
			}
			for range 50 {
				mu.Lock()
				ok := slices.ContainsFunc(ids, func(id string) bool { return seen[id] })
				mu.Unlock()
				if ok {
					return
				}
				select {
				case err := <-ended:
					t.Fatalf("Consume returned %v before a message %s arrived", err, what)
				case <-ctx.Done():
					t.Fatalf("none of the %d messages %s arrived", len(ids), what)
				case <-time.After(10 * time.Millisecond): // polling the handler's record
				}
			}
		}
	}
	roundTrip("before the cut")
	p.cut()
	roundTrip("after the cut")
	cancel()
	if err := <-ended; err != nil {
		t.Fatalf("Consume: %v", err)
	}
}
