package publishers_test

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

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
