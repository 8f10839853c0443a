package roundtrip

import (
	"testing"
	"time"
)

// TestSpanLastIsTheLastToArrive: the last latency is the one of the message that arrived last, not the
// longest (a slow early message and a fast late one), whatever order the arrivals are added in.
func TestSpanLastIsTheLastToArrive(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	arrivals := []struct{ received, sent time.Time }{
		{at(10), at(0)},  // 10 ms, the longest
		{at(12), at(11)}, // 1 ms, the last to arrive
		{at(5), at(4)},   // 1 ms, added after it but arrived earlier
	}
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
		var s span
		for _, i := range order {
			s.add(arrivals[i].received, arrivals[i].sent)
		}
		if s.lastLatency != time.Millisecond || s.maxLatency != 10*time.Millisecond || !s.first.Equal(at(5)) || !s.last.Equal(at(12)) {
			t.Errorf("order %v: last %v max %v first %v last %v", order, s.lastLatency, s.maxLatency, s.first, s.last)
		}
	}
}
