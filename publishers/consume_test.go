package publishers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// consumeGrace is how long a test keeps consuming after the last expected message, so duplicates or
// strays that would follow it are seen too.
const consumeGrace = 500 * time.Millisecond

// checkConsume publishes n messages to topic round-robin over pub's hosts, consumes topic with cons and
// requires exactly those n messages back, each once and from the host it was published to. Then it
// checks the consumer's lifecycle: Consume ends with its context, Close is idempotent and ends it too,
// and Consume after Close fails with ErrClosed.
func checkConsume(t *testing.T, pub publishers.Publisher, cons publishers.Consumer, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := message.NewSource()
	hosts := len(pub.Hosts())
	if got := len(cons.Hosts()); got != hosts {
		t.Fatalf("consumer has %d hosts, publisher %d", got, hosts)
	}
	wantHost := make(map[string]int, n)
	for i := range n {
		id := src.NextID()
		wantHost[message.FormatID(id)] = i % hosts
		if err := pub.Publish(ctx, i%hosts, topic, src.Build(id, 100)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}

	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		count    int
		problems []string
	)
	all := make(chan struct{})
	consumeCtx, stop := context.WithCancel(ctx)
	defer stop()
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Consume(consumeCtx, topic, func(d publishers.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			id, _, err := message.Parse(d.Body)
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("unparsable body %q: %v", d.Body, err))
			case d.Topic != topic:
				problems = append(problems, fmt.Sprintf("id %s: topic %q, want %q", id, d.Topic, topic))
			case d.Host != wantHost[id]:
				problems = append(problems, fmt.Sprintf("id %s: from host %d, published to %d", id, d.Host, wantHost[id]))
			}
			seen[id]++
			count++
			if count == n {
				close(all)
			}
		})
	}()
	select {
	case <-all:
	case err := <-ended:
		t.Fatalf("Consume returned before all messages arrived: %v", err)
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("%d of %d messages consumed within the deadline", count, n)
	}
	time.Sleep(consumeGrace) // absence of extras can only be observed over time
	stop()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("Consume after its context ended: %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Consume did not return after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if count != n || len(seen) != n {
		t.Errorf("consumed %d messages with %d distinct ids, want %d", count, len(seen), n)
	}
	for id, k := range seen {
		if _, ok := wantHost[id]; !ok {
			t.Errorf("id %s was never published", id)
		} else if k != 1 {
			t.Errorf("id %s consumed %d times", id, k)
		}
	}
	checkClose(t, cons, topic)
}

// checkClose requires Close to end a running Consume, to be idempotent, and Consume afterwards to fail
// with ErrClosed.
func checkClose(t *testing.T, cons publishers.Consumer, topic string) {
	t.Helper()
	ended := make(chan error, 1)
	go func() { ended <- cons.Consume(context.Background(), topic, func(publishers.Delivery) {}) }()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		if err := cons.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	select {
	case err := <-ended:
		if err != nil && !errors.Is(err, publishers.ErrClosed) { // Close may win the race with Consume's start
			t.Errorf("Consume ended by Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not end a running Consume")
	}
	<-closed
	if err := cons.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := cons.Consume(context.Background(), topic, func(publishers.Delivery) {}); !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("Consume after Close: %v, want ErrClosed", err)
	}
}

var topicSeq struct {
	sync.Mutex
	n int
}

// freshTopic returns a topic name no earlier run used, valid on every broker.
func freshTopic(prefix string) string {
	topicSeq.Lock()
	defer topicSeq.Unlock()
	topicSeq.n++
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), topicSeq.n)
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
