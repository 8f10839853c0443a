package rocketmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// openLibraryVia is a library publisher of f's cluster through the name server at nsAddr, warmed up.
func openLibraryVia(t *testing.T, f *fakeRocketMQ, nsAddr string) *rocketmq.Publisher {
	c := rocketmq.DefaultConfig()
	c.Client = rocketmq.ClientLibrary
	c.NameServers = []string{nsAddr}
	c.Producers = 1
	p, err := rocketmq.NewLibrary(c, nil, publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := p.Publish(ctx, 0, "topic", []byte("warm")); err != nil {
		t.Fatalf("warm publish: %v", err)
	}
	return p
}

// leavesInTime publishes with deadline d and fails t unless the publish returns within d and a margin.
func leavesInTime(t *testing.T, p *rocketmq.Publisher, topic string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := p.Publish(ctx, 0, topic, []byte("small"))
	if took := time.Since(start); took > d+400*time.Millisecond {
		t.Errorf("publish to %s with a %v deadline returned after %v (%v)", topic, d, took, err)
	}
	if !errors.Is(err, publishers.ErrTimeout) {
		t.Errorf("publish to %s: %v, want a timeout", topic, err)
	}
}

// TestLibraryFrozenNameServer: rocketmq-client-go looks a new topic's route up inside SendAsync,
// waiting up to 6 s per name server; a publish leaves at its own deadline all the same.
func TestLibraryFrozenNameServer(t *testing.T) {
	f := &fakeRocketMQ{}
	f.broker = publishertest.StartFakeServer(t, f.serveBroker)
	f.ns = publishertest.StartFakeServer(t, f.serveNameServer)
	px := publishertest.StartStallProxy(t, f.ns.Addr(), 4<<10)
	p := openLibraryVia(t, f, px.Addr())
	px.Stall(true)
	var wg sync.WaitGroup
	for i := range 2 { // the client serialises the look-ups: each waits out 6 s before Close ends
		wg.Go(func() { leavesInTime(t, p, fmt.Sprintf("fresh%d", i), 200*time.Millisecond) })
	}
	wg.Wait()
}

// TestLibraryStalledWrite: the client's send goroutine waits for the connection's lock, held by
// another send's write to a broker that stopped reading; a publish leaves at its own deadline.
func TestLibraryStalledWrite(t *testing.T) {
	f := &fakeRocketMQ{}
	f.broker = publishertest.StartFakeServer(t, f.serveBroker)
	bpx := publishertest.StartStallProxy(t, f.broker.Addr(), 4<<10)
	f.via = bpx.Addr()
	f.ns = publishertest.StartFakeServer(t, f.serveNameServer)
	p := openLibraryVia(t, f, f.ns.Addr())
	bpx.Stall(true)
	bigDone := make(chan struct{})
	go func() {
		defer close(bigDone)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = p.Publish(ctx, 0, "topic", []byte(strings.Repeat("x", 20<<20))) // its write blocks to its deadline
	}()
	// the big write needs a moment to fill the buffers; any later publish then queues behind it
	for range 3 {
		leavesInTime(t, p, "topic", 200*time.Millisecond)
	}
	<-bigDone
}

// TestLibraryRefusedRedialBounded: rocketmq-client-go dials on every send that finds no connection;
// against a refused port, the publisher's redial gate lets through only what publishers.Backoff
// allows, and the publishes in backoff fail at once as unavailable.
func TestLibraryRefusedRedialBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close() // the broker's port now refuses
	f := &fakeRocketMQ{via: refused}
	f.broker = publishertest.StartFakeServer(t, f.serveBroker)
	f.ns = publishertest.StartFakeServer(t, f.serveNameServer)
	c := rocketmq.DefaultConfig()
	c.Client = rocketmq.ClientLibrary
	c.NameServers = f.Addrs()
	c.Producers = 1
	p, err := rocketmq.NewLibrary(c, nil, publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sends := rocketmq.CountClientSends(p)
	var unavailable, publishes int
	var mu sync.Mutex
	elapsed := publishertest.Hammer(4, time.Second, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := p.Publish(ctx, 0, "t", []byte("m"))
		cancel()
		mu.Lock()
		publishes++
		if errors.Is(err, publishers.ErrUnavailable) {
			unavailable++
		}
		mu.Unlock()
	})
	bound := publishertest.MaxDials(publishers.DefaultBackoff(), elapsed, 1, false)
	t.Logf("%d publishes (%d unavailable), %d handed to the client in %v (bound %d)", publishes, unavailable, sends.Load(), elapsed.Round(time.Millisecond), bound)
	// the first dial's route look-up and the concurrent callers that pass the gate together as a
	// backoff ends: a few over the per-dial bound
	if n := sends.Load(); n > int64(bound)+4 {
		t.Errorf("%d sends (each a dial) in %v, want at most %d", n, elapsed, bound+4)
	}
	if unavailable < publishes/2 {
		t.Errorf("%d of %d publishes unavailable, want most (failing at once in backoff)", unavailable, publishes)
	}
}
