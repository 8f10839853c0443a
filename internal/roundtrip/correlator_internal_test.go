package roundtrip

import (
	"context"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// TestCorrelatorFinishedBounded: the finished ids (kept to recognise duplicates) are forgotten once
// retain has passed whether or not acks still arrive, and never number more than maxFinished, the
// oldest going first.
func TestCorrelatorFinishedBounded(t *testing.T) {
	const retain = time.Minute
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := message.NewSource()
	ids := make([]uint64, 1000)
	for i := range ids {
		ids[i] = src.NextID()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // every Wait on it gives up at once: a loss
	lose := func(c *Correlator, at time.Time, ids []uint64) {
		c.now = func() time.Time { return at }
		for _, id := range ids {
			if _, err := c.Expect(message.FormatID(id)).Wait(ctx); err == nil {
				t.Fatalf("%x acked", id)
			}
		}
	}
	ack := func(c *Correlator, at time.Time, ids []uint64, expect bool) {
		for _, id := range ids {
			var p *Pending
			if expect {
				p = c.Expect(message.FormatID(id))
			}
			c.Handle(publishers.Delivery{Body: src.Build(id, 64), Received: at})
			if p != nil {
				if _, err := p.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cases := []struct {
		name        string
		maxFinished int
		run         func(c *Correlator)
		finished    int
		stats       Stats
	}{
		{name: "losses past retain with no ack since", maxFinished: DefaultMaxFinished, run: func(c *Correlator) {
			lose(c, t0, ids[:999])
			lose(c, t0.Add(retain+time.Nanosecond), ids[999:])
		}, finished: 1, stats: Stats{Lost: 1000}},
		{name: "acks past retain, then only losses", maxFinished: DefaultMaxFinished, run: func(c *Correlator) {
			ack(c, t0, ids[:999], true)
			lose(c, t0.Add(retain+time.Nanosecond), ids[999:])
		}, finished: 1, stats: Stats{Acked: 999, Lost: 1}},
		{name: "losses within retain are kept", maxFinished: DefaultMaxFinished, run: func(c *Correlator) {
			lose(c, t0, ids[:999])
			lose(c, t0.Add(retain), ids[999:])
		}, finished: 1000, stats: Stats{Lost: 1000}},
		{name: "the cap forgets the oldest", maxFinished: 100, run: func(c *Correlator) {
			lose(c, t0, ids[:500])
			ack(c, t0, ids[500:], true)
			ack(c, t0, ids[:1], false)   // forgotten: unknown
			ack(c, t0, ids[999:], false) // remembered: a duplicate
		}, finished: 100, stats: Stats{Lost: 500, Acked: 500, Unknown: 1, Duplicates: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCorrelator("b", retain, nil)
			c.maxFinished = tc.maxFinished
			tc.run(c)
			c.mu.Lock()
			finished, order := len(c.finished), len(c.order)
			c.mu.Unlock()
			if finished != tc.finished || order != tc.finished {
				t.Errorf("%d finished ids (%d in order), want %d", finished, order, tc.finished)
			}
			if s := c.Stats(); s != tc.stats {
				t.Errorf("stats %+v, want %+v", s, tc.stats)
			}
		})
	}
}
