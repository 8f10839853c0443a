package kafka_test

import (
	"context"
	"fmt"
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

// TestTopicLookupOutlivesItsCaller: a topic's lookup is shared and is the cluster's, not the first
// caller's. A caller whose deadline ends during the lookup leaves at that deadline, and the lookup goes
// on: a caller with a later deadline who joined it is not failed with the first one's timeout, and
// callers shorter than the lookup still find the topic once it completed.
func TestTopicLookupOutlivesItsCaller(t *testing.T) {
	fs := startFakeCluster(t, 2)
	p := clusterPublisher(t, fs, 5*time.Second)
	fs[1].lagging.Store(6) // the lookup polls until broker 1 knows the topic: 6 polls of 50 ms at least
	publish := func(d time.Duration, body string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		err := p.Publish(ctx, 0, "slow-lookup", []byte(body))
		return time.Since(start), err
	}
	first := make(chan error, 1)
	go func() {
		took, err := publish(50*time.Millisecond, "first")
		if err == nil || took > 500*time.Millisecond {
			err = fmt.Errorf("%v after %v, want a timeout at its 50 ms deadline", err, took)
		} else {
			err = nil
		}
		first <- err
	}()
	time.Sleep(10 * time.Millisecond) // joins the lookup the first publish started
	if _, err := publish(5*time.Second, "second"); err != nil {
		t.Errorf("a 5 s publish that joined a 50 ms one's lookup: %v", err)
	}
	if err := <-first; err != nil {
		t.Errorf("the 50 ms publish: %v", err)
	}
	// Shorter than the lookup (6 polls of 50 ms), with room for a busy machine: a CI run with every
	// broker's JVM on 2 cores took 53 ms to answer a 50 ms one.
	if took, err := publish(250*time.Millisecond, "third"); err != nil {
		t.Errorf("a 250 ms publish after the lookup: %v after %v", err, took)
	}
	if got := fs[0].Stored(); got["second"] != 1 || got["third"] != 1 {
		t.Errorf("broker 0 stored %v, want second and third once each", got)
	}
}
