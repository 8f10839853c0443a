package load

import (
	"testing"
	"time"
)

// TestRecorderMerge: latencies recorded by several Recorders and merged give the percentiles one
// Recorder of all of them gives (nearest rank: 1 slow send in 1000 is the p99.9, not the p99).
func TestRecorderMerge(t *testing.T) {
	var a, b, all Recorder
	for i := range 1000 {
		d := 100 * time.Microsecond
		if i == 999 {
			d = 50 * time.Millisecond
		}
		if i == 998 {
			d = 7 * time.Millisecond
		}
		all.Add(d)
		if i%2 == 0 {
			a.Add(d)
		} else {
			b.Add(d)
		}
	}
	var m, empty Recorder
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&empty)
	if m.Count() != 1000 || m.Latency() != all.Latency() {
		t.Fatalf("merged %d: %+v, want 1000: %+v", m.Count(), m.Latency(), all.Latency())
	}
	if l := m.Latency(); l.P50 != 0.1 || l.P99 != 0.1 || l.P999 < 6.99 || l.P999 > 7.01 || l.Max != 50 {
		t.Errorf("latency %+v: want p50 = p99 = 0.1 ms, p99.9 7 ms, max 50 ms", l)
	}
	if (&Recorder{}).Latency() != (Latency{}) {
		t.Error("an empty Recorder has percentiles")
	}
}
