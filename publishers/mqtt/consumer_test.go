package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestConsumer: a consumer on two embedded servers gets what each server takes, with the server's
// index, and after its connections are cut it subscribes again and gets what follows; at MQTT 5 and
// 3.1.1 (the consumer and the publisher both at that version).
func TestConsumer(t *testing.T) {
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) { consumerTest(t, v) })
	}
}

func consumerTest(t *testing.T, version string) {
	e := embeddedFor(t, 2)
	var proxies []*publishertest.StallProxy
	var addrs []string
	for _, a := range e.Addrs() {
		px := publishertest.StartStallProxy(t, a, 0)
		proxies = append(proxies, px)
		addrs = append(addrs, px.Addr())
	}
	c := DefaultConfig()
	c.Servers = addrs
	c.Version = version
	cons, err := NewConsumer(c, publishers.ConsumerOptions{}, discard())
	if err != nil {
		t.Fatal(err)
	}
	pc := DefaultConfig()
	pc.Servers = e.Addrs() // straight to the servers: a cut stops the consumer only
	pc.Version = version
	pub, err := New(pc, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close() }()

	var mu sync.Mutex
	got := map[string]int{} // body -> host it came from
	arrived := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cons.Consume(ctx, "consumed", func(d publishers.Delivery) {
			mu.Lock()
			got[string(d.Body)] = d.Host
			mu.Unlock()
			select {
			case arrived <- struct{}{}:
			default:
			}
		})
	}()
	// publishUntil publishes to each host until the consumer has its messages: its subscription
	// exists some time after Consume started (MQTT keeps nothing for a subscriber not yet there).
	round := 0
	publishUntil := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		round++
		for {
			for h := range addrs {
				body := fmt.Sprintf("%s %d host %d", what, round, h)
				if err := pub.Publish(context.Background(), h, "consumed", []byte(body)); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			n := 0
			for body, h := range got {
				if body == fmt.Sprintf("%s %d host %d", what, round, h) {
					n++
				}
			}
			mu.Unlock()
			if n == len(addrs) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the consumer got %d of %d hosts' messages within 10s", what, n, len(addrs))
			}
			select {
			case <-arrived:
			case <-time.After(50 * time.Millisecond):
			}
			round++
		}
	}
	publishUntil("before")
	for _, px := range proxies {
		px.Cut()
	}
	publishUntil("after cut")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume: %v", err)
	}
	if err := cons.Close(); err != nil {
		t.Error(err)
	}
	if err := cons.Consume(context.Background(), "x", func(publishers.Delivery) {}); !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("Consume after Close: %v, want ErrClosed", err)
	}
}

// TestConsumerRefusedAtStart: a server that cannot be subscribed to fails Consume at once, naming it.
func TestConsumerRefusedAtStart(t *testing.T) {
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) { consumerRefusedAtStart(t, v) })
	}
}

func consumerRefusedAtStart(t *testing.T, version string) {
	f := newFakeV(t, refuseConnect, version)
	c := DefaultConfig()
	c.Servers = []string{f.addr()}
	c.Version = version
	cons, err := NewConsumer(c, publishers.ConsumerOptions{}, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cons.Close() }()
	err = cons.Consume(context.Background(), "t", func(publishers.Delivery) {})
	if !errors.Is(err, publishers.ErrUnavailable) {
		t.Errorf("Consume: %v, want ErrUnavailable", err)
	}
	if err := cons.Consume(context.Background(), "a/#", func(publishers.Delivery) {}); !errors.Is(err, publishers.ErrBadTopic) {
		t.Errorf("Consume of a wildcard: %v, want ErrBadTopic", err)
	}
}

// TestConsumeEndsWhileSubscribing: a Consume whose context ends while it still subscribes (to a
// server that accepts and never answers) ends like one whose context ended later: nil, not an
// unavailable error (consume.Run's handler cancels once it had its count, maybe before every host
// is subscribed).
func TestConsumeEndsWhileSubscribing(t *testing.T) {
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) { consumeEndsWhileSubscribing(t, v) })
	}
}

func consumeEndsWhileSubscribing(t *testing.T, version string) {
	silent := publishertest.SilentServer(t)
	c := DefaultConfig()
	c.Servers = []string{silent}
	c.Version = version
	k, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	cctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := k.Consume(cctx, "ending", func(publishers.Delivery) {}); err != nil {
		t.Fatalf("Consume whose context ended while it subscribed: %v, want nil", err)
	}
}
