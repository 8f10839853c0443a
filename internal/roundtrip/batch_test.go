package roundtrip_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
)

// TestBatch: a batch comes back exactly once through either handoff; an echo that drops one id or sends
// one twice shows as lost = 1 or duplicates = 1; no latency exceeds the batch's time.
func TestBatch(t *testing.T) {
	const n, batchSize = 500, 1024
	cases := []struct {
		name       string
		handoff    roundtrip.Handoff
		copies     func(seen int64) int // by the order the echo sees messages
		lost, dups int
	}{
		{name: "queue", handoff: roundtrip.Queue},
		{name: "direct", handoff: roundtrip.Direct},
		{name: "drop the 7th", handoff: roundtrip.Queue, copies: func(seen int64) int { return map[bool]int{true: 0, false: 1}[seen == 7] }, lost: 1},
		{name: "twice the 7th", handoff: roundtrip.Direct, copies: func(seen int64) int { return map[bool]int{true: 2, false: 1}[seen == 7] }, dups: 1},
	}
	for _, bk := range brokers {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.start(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					echo := &roundtrip.EchoOptions{Consumer: b.consumer(t, "mqtarget-echo"), Handoff: c.handoff, Workers: 4, Timeout: 5 * time.Second}
					if c.copies != nil {
						var seen atomic.Int64 // the direct handoff's consumer publishes beside the workers
						roundtrip.SetCopies(echo, func(_ string, size int) int {
							if size != batchSize { // a probe, of which Batch sends more while a consumer subscribes
								return 1
							}
							return c.copies(seen.Add(1))
						})
					}
					var reports []roundtrip.Progress // one goroutine reports; read after Batch returned
					start := time.Now()
					r, err := roundtrip.Batch(context.Background(), roundtrip.BatchOptions{
						Progress: func(p roundtrip.Progress) { reports = append(reports, p) },
						Broker:   b.name, Publisher: b.pub, Acks: b.consumer(t, "mqtarget-roundtrip"), Echo: echo,
						Topic: itest.FreshTopic("batch"), Count: n, Size: batchSize, Producers: 4,
						Wait: map[bool]time.Duration{true: 2 * time.Second, false: 30 * time.Second}[c.lost > 0], Grace: 300 * time.Millisecond,
					})
					total := time.Since(start)
					if err != nil {
						t.Fatal(err)
					}
					if r.Lost != c.lost || r.Duplicates != c.dups || r.OK() != (c.lost+c.dups == 0) || r.Count != n {
						t.Errorf("lost %d duplicates %d (count %d, ok %v), want %d %d", r.Lost, r.Duplicates, r.Count, r.OK(), c.lost, c.dups)
					}
					checkProgress(t, reports, n, n-c.lost, total)
					totalMs := float64(total.Microseconds()) / 1000
					if r.ReturnLastLatencyMs <= 0 || r.ReturnLastLatencyMs > r.RTTMaxMs || r.RTTMaxMs > totalMs || r.EchoLastLatencyMs > r.EchoMaxLatencyMs ||
						r.EchoMaxLatencyMs > r.RTTMaxMs || r.RTTP50Ms > r.RTTP99Ms || r.RTTP99Ms > r.RTTMaxMs || r.SendMs > totalMs {
						t.Errorf("times inconsistent (total %.3f ms): %+v", totalMs, r)
					}
				})
			}
		})
	}
}

// checkProgress: the reports never go back or beyond the batch, and the last one, at the end, has every
// message sent and the acks that came back.
func checkProgress(t *testing.T, reports []roundtrip.Progress, count, acked int, total time.Duration) {
	t.Helper()
	if len(reports) == 0 {
		t.Fatal("no progress reported")
	}
	var prev roundtrip.Progress
	for _, p := range reports {
		if p.Count != count || p.Sent < prev.Sent || p.Acked < prev.Acked || p.Elapsed < prev.Elapsed || p.Sent > count || p.Elapsed > total {
			t.Fatalf("progress %+v after %+v (count %d, batch %v)", p, prev, count, total)
		}
		prev = p
	}
	if prev.Sent != count || prev.Acked != acked {
		t.Errorf("last progress %+v, want %d sent and %d back", prev, count, acked)
	}
}
