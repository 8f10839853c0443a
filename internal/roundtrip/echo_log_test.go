package roundtrip_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/publishers"
)

// downPub fails every publish, as a broker that is down does.
type downPub struct {
	publishers.Publisher
	calls atomic.Int64
}

func (p *downPub) Publish(context.Context, int, string, []byte) error {
	p.calls.Add(1)
	return publishers.ErrUnavailable
}
func (*downPub) Hosts() []string            { return []string{"a:1"} }
func (*downPub) ValidateTopic(string) error { return nil }

// burstConsumer delivers n messages at once, then waits for the end.
type burstConsumer struct{ n int }

func (c burstConsumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	for range c.n {
		handle(publishers.Delivery{Topic: topic, Body: []byte("m"), Received: time.Now()})
	}
	<-ctx.Done()
	return nil
}
func (burstConsumer) Hosts() []string { return []string{"a:1"} }
func (burstConsumer) Close() error    { return nil }

type warnLines struct {
	mu sync.Mutex
	n  int
}

func (h *warnLines) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *warnLines) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return nil
}
func (h *warnLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnLines) WithGroup(string) slog.Handler      { return h }

// TestEchoFailureLogs: with the ack broker down, every echoed message fails; the echo logs a few of
// those failures, not one line each.
func TestEchoFailureLogs(t *testing.T) {
	const n = 500
	pub, logs := &downPub{}, &warnLines{}
	echo, err := roundtrip.StartEcho(roundtrip.EchoOptions{Broker: "nsq", Consumer: burstConsumer{n}, Publisher: pub,
		Topics: []string{"t"}, Handoff: roundtrip.Queue, Workers: 2, Log: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pub.calls.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling within the deadline
	}
	echo.Close()
	if got := pub.calls.Load(); got < n {
		t.Fatalf("%d of %d acks attempted", got, n)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.n > 2 {
		t.Errorf("%d warning lines for %d failed acks, want a few", logs.n, n)
	}
}
