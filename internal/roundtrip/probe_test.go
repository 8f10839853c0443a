package roundtrip_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// TestBatchWaitsForSubscriptions: on a broker that drops what is published before a subscription
// takes effect (memBroker: each of the echo's and the ack consumer's subscriptions misses the first
// two messages of its topic on each host), a batch comes back whole, because it starts only once a
// probe came back from every host; a probe that arrives again or late, during the batch, through the
// echo and back to the ack consumer, counts as nothing (neither in lost and duplicates nor in the echo's
// times: its send time is from before the batch).
func TestBatchWaitsForSubscriptions(t *testing.T) {
	const n = 200
	cases := []struct {
		name    string
		handoff roundtrip.Handoff
		holdAck bool // hold the first probe delivered to the ack consumer, not the echo
		hold    bool // hold the first probe delivered
		dup     bool // ... and deliver it at once too
		acks    int  // how often the held probe's ack reaches the ack consumer
	}{
		{name: "late subscriptions", handoff: roundtrip.Queue},
		{name: "late subscriptions direct", handoff: roundtrip.Direct},
		{name: "a retried probe's first at the echo during the batch", handoff: roundtrip.Direct, hold: true, acks: 1},
		{name: "a probe's ack again during the batch", handoff: roundtrip.Queue, hold: true, holdAck: true, dup: true, acks: 2},
		{name: "a retried probe's first ack during the batch", handoff: roundtrip.Queue, hold: true, holdAck: true, acks: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := itest.FreshTopic("subscribe")
			b := newMemBroker(2, 2)
			if c.hold {
				b.hold, b.dup, b.releaseAfter = topic, c.dup, n/2 // mid-batch: fewer than n/2 probes go first
				if c.holdAck {
					b.hold += roundtrip.DefaultAckSuffix
				}
			}
			pub := memPub{b}
			r, err := roundtrip.Batch(context.Background(), roundtrip.BatchOptions{
				Broker: "mem", Publisher: pub, Acks: newMemConsumer(b),
				Echo:  &roundtrip.EchoOptions{Consumer: newMemConsumer(b), Handoff: c.handoff, Workers: 2, Timeout: 5 * time.Second},
				Topic: topic, Count: n, Size: 100, Producers: 4, Wait: 10 * time.Second, Grace: 50 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Lost != 0 || r.Duplicates != 0 || !r.OK() || r.Count != n {
				t.Errorf("lost %d duplicates %d of %d, want all back exactly once", r.Lost, r.Duplicates, r.Count)
			}
			if r.EchoMaxLatencyMs > r.RTTMaxMs {
				t.Errorf("times include a probe: %+v", r)
			}
			if !c.hold {
				return
			}
			id := b.heldID()
			if id == "" {
				t.Fatal("no probe was held")
			}
			if got := b.ackedCount(id); got != c.acks {
				t.Errorf("the held probe's ack reached the ack consumer %d times, want %d (the case did not happen)", got, c.acks)
			}
		})
	}
}

// TestProbe: Probe returns once every host's probe came back; without an echo it fails after its wait
// with ErrNotLive naming every host, having published a bounded number of probes; a probe that comes
// back again after Probe returned is no ack, loss, duplicate or unknown message; ctx's end is told as
// such; a topic without acks is refused.
func TestProbe(t *testing.T) {
	t.Run("every host", func(t *testing.T) {
		b, topic := newMemBroker(3, 2), itest.FreshTopic("probe")
		b.hold, b.dup = topic+roundtrip.DefaultAckSuffix, true
		memEcho(t, b, topic)
		client, corr := memClient(t, b, topic)
		if err := client.Probe(context.Background(), topic, message.NewSource(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		for h := range 3 {
			if got := b.publishedTo(h, topic+".ack"); got < 1 {
				t.Errorf("host %d: %d acks published, want a probe's at least", h, got)
			}
		}
		id := b.heldID()
		b.release() // the held probe's copy, after Probe returned
		testwait.Until(t, 10*time.Second, "the probe's second ack", func() error {
			if got := b.ackedCount(id); got != 2 {
				return fmt.Errorf("%d acks of %s", got, id)
			}
			return nil
		})
		if s := corr.Stats(); s != (roundtrip.Stats{}) {
			t.Errorf("stats %+v after probes only, want nothing counted", s)
		}
		if !corr.IsProbe(id) {
			t.Errorf("IsProbe(%s) false", id)
		}
	})

	t.Run("no echo", func(t *testing.T) {
		b, topic := newMemBroker(2, 0), itest.FreshTopic("probe")
		client, corr := memClient(t, b, topic)
		const wait = time.Second
		err := client.Probe(context.Background(), topic, message.NewSource(), wait)
		if !errors.Is(err, roundtrip.ErrNotLive) {
			t.Fatalf("err %v, want ErrNotLive", err)
		}
		for h := range 2 {
			if want := fmt.Sprintf("host %d (mem%d)", h, h); !contains(err.Error(), want) {
				t.Errorf("err %q does not name %s", err, want)
			}
			// Paced: 20, 40, 80, 160, 320 ms between tries fill the second with at most six.
			if got := b.publishedTo(h, topic); got < 2 || got > 6 || got > roundtrip.ProbeBudget {
				t.Errorf("host %d: %d probes published in %v, want 2..6", h, got, wait)
			}
		}
		if s := corr.Stats(); s != (roundtrip.Stats{}) {
			t.Errorf("stats %+v after probes only, want nothing counted", s)
		}
	})

	t.Run("topic rejected", func(t *testing.T) {
		// a broker that refuses the topic: one probe per host, then Probe gives up at once saying why
		b, topic := newMemBroker(2, 0), itest.FreshTopic("probe")
		b.refuse = topic
		memEcho(t, b, topic)
		client, _ := memClient(t, b, topic)
		err := client.Probe(context.Background(), topic, message.NewSource(), 5*time.Second)
		if !errors.Is(err, roundtrip.ErrNotLive) || !errors.Is(err, publishers.ErrRejected) || !contains(err.Error(), "not permitted") {
			t.Fatalf("err %v, want ErrNotLive with the rejection", err)
		}
		for h := range 2 {
			if got := b.publishedTo(h, topic); got != 1 {
				t.Errorf("host %d: %d probes published, want 1", h, got)
			}
		}
	})

	t.Run("ctx ends", func(t *testing.T) {
		topic := itest.FreshTopic("probe")
		client, _ := memClient(t, newMemBroker(1, 0), topic)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := client.Probe(ctx, topic, message.NewSource(), time.Hour)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, roundtrip.ErrNotLive) {
			t.Errorf("err %v, want ctx's", err)
		}
	})

	t.Run("topic without acks", func(t *testing.T) {
		client, _ := memClient(t, newMemBroker(1, 0), "t")
		if err := client.Probe(context.Background(), "other", message.NewSource(), time.Second); !errors.Is(err, roundtrip.ErrTopic) {
			t.Errorf("err %v, want ErrTopic", err)
		}
	})
}

// TestBatchNotLive: a batch whose probes never come back (no echo) fails before it publishes, naming
// the host.
func TestBatchNotLive(t *testing.T) {
	b, topic := newMemBroker(2, 0), itest.FreshTopic("notlive")
	_, err := roundtrip.Batch(context.Background(), roundtrip.BatchOptions{Broker: "mem", Publisher: memPub{b}, Acks: newMemConsumer(b),
		Topic: topic, Count: 10, Size: 100, Producers: 1, Wait: time.Second, ProbeWait: 200 * time.Millisecond})
	if !errors.Is(err, roundtrip.ErrNotLive) || !contains(err.Error(), "host 1 (mem1)") {
		t.Fatalf("err %v, want ErrNotLive naming host 1 (mem1)", err)
	}
	if got := b.publishedTo(0, topic) + b.publishedTo(1, topic); got > 2*roundtrip.ProbeBudget {
		t.Errorf("%d published: more than the probes", got)
	}
}

// TestStartProbes: a round trip asked for while the consumers still subscribe (what /sendRoundTrip
// meets right after the service started) waits for the probes and comes back, where it would have
// gone to nobody; without an echo it ends lost at its deadline without publishing, and once the probe
// gave up, round trips are published as without probes.
func TestStartProbes(t *testing.T) {
	t.Run("late subscriptions", func(t *testing.T) {
		b, topic := newMemBroker(2, 2), itest.FreshTopic("rt")
		client, corr := memClient(t, b, topic)
		client.StartProbes(message.NewSource(), 10*time.Second)
		memEcho(t, b, topic)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		src := message.NewSource()
		for h := range 2 {
			if _, err := client.RoundTrip(ctx, h, topic, src.Build(src.NextID(), 64)); err != nil {
				t.Fatalf("host %d: %v", h, err)
			}
		}
		if s := corr.Stats(); s.Acked != 2 || s.Lost != 0 || s.Duplicates != 0 || s.Unknown != 0 {
			t.Errorf("stats %+v, want 2 acked and nothing else", s)
		}
	})

	t.Run("no echo", func(t *testing.T) {
		b, topic := newMemBroker(1, 0), itest.FreshTopic("rt")
		client, corr := memClient(t, b, topic)
		const wait = time.Second
		client.StartProbes(message.NewSource(), wait)
		src := message.NewSource()
		short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		id := src.NextID()
		_, err := client.RoundTrip(short, 0, topic, src.Build(id, 64))
		if !errors.Is(err, roundtrip.ErrLost) || !errors.Is(err, roundtrip.ErrNotLive) {
			t.Fatalf("while probing: %v, want ErrLost and ErrNotLive", err)
		}
		if b.sawID(message.FormatID(id)) {
			t.Error("the round trip was published while the probes ran")
		}
		testwait.Until(t, 10*time.Second, "the probe giving up", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, err := client.RoundTrip(ctx, 0, topic, src.Build(src.NextID(), 64)); errors.Is(err, roundtrip.ErrNotLive) || !errors.Is(err, roundtrip.ErrLost) {
				return fmt.Errorf("round trip: %v", err)
			}
			return nil
		})
		if s := corr.Stats(); s.Lost < 2 || s.Acked != 0 || s.Duplicates != 0 || s.Unknown != 0 {
			t.Errorf("stats %+v, want the round trips lost and nothing else", s)
		}
	})
}

// memClient returns a Client of topic's acks on b, with its correlator; closed when the test ends.
func memClient(t *testing.T, b *memBroker, topic string) (*roundtrip.Client, *roundtrip.Correlator) {
	corr := roundtrip.NewCorrelator("mem", time.Minute, nil)
	client := roundtrip.NewClient(memPub{b}, newMemConsumer(b), []string{topic}, "", corr, quiet)
	t.Cleanup(func() { client.Close() })
	return client, corr
}

// memEcho starts an echo of topic on b, closed when the test ends.
func memEcho(t *testing.T, b *memBroker, topic string) {
	echo, err := roundtrip.StartEcho(roundtrip.EchoOptions{Broker: "mem", Consumer: newMemConsumer(b), Publisher: memPub{b},
		Topics: []string{topic}, Handoff: roundtrip.Queue, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
}
