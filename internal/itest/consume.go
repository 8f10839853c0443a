package itest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// collect consumes topic with cons, keeping the bodies that came from host, until want of them arrived
// (then for grace more, so extras and duplicates that follow are seen too) or the deadline passed. It
// consumes with the product's own consumers: the suite checks delivery with what users run.
func collect(t testing.TB, cons publishers.Consumer, host int, topic string, want int, grace, deadline time.Duration) [][]byte {
	t.Helper()
	if want <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var (
		mu  sync.Mutex
		got [][]byte
	)
	enough := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Consume(ctx, topic, func(d publishers.Delivery) {
			if d.Host != host {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d.Body)
			if len(got) == want {
				close(enough)
			}
		})
	}()
	select {
	case <-enough:
		select {
		case <-time.After(grace):
		case <-ctx.Done():
		}
	case <-ctx.Done():
	case err := <-ended:
		t.Fatalf("consuming %s: %v", topic, err)
	}
	cancel()
	if err := <-ended; err != nil {
		t.Fatalf("consuming %s: %v", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}

// testLogger logs to t, shown only for failing tests.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// consumeGrace is how long a test keeps consuming after the last expected message, so duplicates or
// strays that would follow it are seen too.
const consumeGrace = 500 * time.Millisecond

// consumeTimeout bounds CheckConsume's publishing, and then its consuming (a group join included).
const consumeTimeout = 30 * time.Second

// CheckConsume publishes n messages to topic round-robin over pub's hosts, consumes topic with cons and
// requires exactly those n messages back, each once and from the host it was published to. Then it
// checks the consumer's lifecycle: Consume ends with its context, Close is idempotent and ends it too,
// and Consume after Close fails with ErrClosed.
func CheckConsume(t *testing.T, pub publishers.Publisher, cons publishers.Consumer, topic string, n int) {
	t.Helper()
	// Publishing and consuming get a deadline each: on a busy CI machine n sequential publishes once
	// took most of a shared 30 s and left the consumer's group join too little ("0 of 500").
	pubCtx, cancelPub := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancelPub()
	src := message.NewSource()
	hosts := len(pub.Hosts())
	if got := len(cons.Hosts()); got != hosts {
		t.Fatalf("consumer has %d hosts, publisher %d", got, hosts)
	}
	wantHost := make(map[string]int, n)
	start := time.Now()
	for i := range n {
		id := src.NextID()
		wantHost[message.FormatID(id)] = i % hosts
		if err := pub.Publish(pubCtx, i%hosts, topic, src.Build(id, 100)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	published := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()

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
		t.Fatalf("%d of %d messages consumed within %v (after publishing them in %v)", count, n, consumeTimeout, published.Round(time.Millisecond))
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

// FreshTopic returns a topic name no earlier run used, valid on every broker.
func FreshTopic(prefix string) string {
	topicSeq.Lock()
	defer topicSeq.Unlock()
	topicSeq.n++
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), topicSeq.n)
}
