package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/kafka"
	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// clusterPublisher is a publisher for fakes, one host each, with publish_timeout timeout.
func clusterPublisher(t *testing.T, fs []*fakeBroker, timeout time.Duration) *kafka.Publisher {
	t.Helper()
	c := kafka.DefaultConfig()
	for _, f := range fs {
		c.Brokers = append(c.Brokers, f.addr())
	}
	c.PublishTimeout = timeout
	p, err := kafka.New(c, pt.Logger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestTopicLookupAcrossBrokers: a new topic's first publish waits until every broker that answers
// knows the topic (a broker that has not caught up answers metadata without it, and the client's
// produce path, asking that broker, would wait out its metadata backoff), and a broker that does not
// answer at all does not stop the lookup for the others.
func TestTopicLookupAcrossBrokers(t *testing.T) {
	for _, tc := range []struct {
		name string
		lag  int32 // broker 1's metadata answers without the topic
		down bool  // broker 1 closed after New
	}{
		{"every broker knows it at once", 0, false},
		{"broker 1 catches up after 3 answers", 3, false},
		{"broker 1 down", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := startFakeCluster(t, 2)
			p := clusterPublisher(t, fs, 3*time.Second)
			if got := len(p.Hosts()); got != 2 {
				t.Fatalf("%d hosts, want 2", got)
			}
			fs[1].lagging.Store(tc.lag)
			if tc.down {
				fs[1].Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Publish(ctx, 0, "fresh", []byte("m0")); err != nil {
				t.Fatalf("host 0: %v", err)
			}
			if left := fs[1].lagging.Load(); left > 0 {
				t.Errorf("host 0's publish was acknowledged while broker 1 still had %d answers without the topic to give", left)
			}
			err := p.Publish(ctx, 1, "fresh", []byte("m1"))
			switch {
			case tc.down && !anyOf(err, publishers.ErrUnavailable, publishers.ErrTimeout):
				t.Errorf("host 1, its broker down: %v, want unavailable or timed out", err)
			case !tc.down && err != nil:
				t.Errorf("host 1: %v", err)
			}
			if got := fs[0].Stored()["m0"]; got != 1 {
				t.Errorf("broker 0 stored m0 %d times, want 1", got)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.down]; fs[1].Stored()["m1"] != want {
				t.Errorf("broker 1 stored m1 %d times, want %d", fs[1].Stored()["m1"], want)
			}
		})
	}
}
