package roundtrip_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/logtest"
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

// TestEchoFailureLogs: with the ack broker down, every echoed message fails; the echo logs a few of
// those failures, not one line each.
func TestEchoFailureLogs(t *testing.T) {
	const n = 500
	pub := &downPub{}
	log, logs := logtest.Logger()
	echo, err := roundtrip.StartEcho(roundtrip.EchoOptions{Broker: "nsq", Consumer: burstConsumer{n}, Publisher: pub,
		Topics: []string{"t"}, Handoff: roundtrip.Queue, Workers: 2, Log: log})
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
	if got := len(logs.Lines()); got > 2 {
		t.Errorf("%d warning lines for %d failed acks, want a few", got, n)
	}
}
