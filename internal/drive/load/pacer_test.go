package load

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSchedule: request k is due at k/rate seconds exactly (no interval rounding that drifts), and the
// requests due within a duration are those with k/rate < duration, at the largest rate and duration too.
func TestSchedule(t *testing.T) {
	cases := []struct {
		rate     int64
		duration time.Duration
		count    int64
	}{
		{3, time.Second, 3},
		{3, time.Second + time.Nanosecond, 4},
		{200, 500 * time.Millisecond, 100},
		{7, 10 * time.Second, 70},
		{MaxRate, MaxDuration, MaxRate * int64(MaxDuration/time.Second)},
	}
	for _, c := range cases {
		n := dueCount(c.duration, c.rate)
		if n != c.count {
			t.Errorf("%d/s for %v: %d due, want %d", c.rate, c.duration, n, c.count)
		}
		if last := dueOffset(n-1, c.rate); last >= c.duration {
			t.Errorf("%d/s for %v: the last due at %v", c.rate, c.duration, last)
		}
		if next := dueOffset(n, c.rate); next < c.duration {
			t.Errorf("%d/s for %v: one more due at %v", c.rate, c.duration, next)
		}
	}
	if d := dueOffset(1, 3); d != 333333333 {
		t.Errorf("1/3 s = %v", d)
	}
	if d := dueOffset(3_000_000, 3); d != 1_000_000*time.Second {
		t.Errorf("3e6 at 3/s: %v, want 1e6 s (no drift)", d)
	}
}

// BenchmarkPacerLag measures the pacer alone, without HTTP: how late it wakes for one second of due
// times at each rate, as lag-p50/p99/max in µs. Not run by the tests (it takes seconds):
// go test -run '^$' -bench PacerLag ./internal/drive/load/
func BenchmarkPacerLag(b *testing.B) {
	for _, rate := range []int64{200, 2000, 10000} {
		b.Run(fmt.Sprintf("%d/s", rate), func(b *testing.B) {
			var h histogram
			for range b.N {
				done := make(chan struct{})
				go func() { // a goroutine of its own: the pacer locks its thread for good
					defer close(done)
					p := newPacer()
					start := time.Now()
					for k := range dueCount(time.Second, rate) {
						due := start.Add(dueOffset(k, rate))
						p.wait(context.Background(), due)
						h.add(time.Since(due))
					}
				}()
				<-done
			}
			l := h.latency()
			b.ReportMetric(l.P50*1e3, "lag-p50-µs")
			b.ReportMetric(l.P99*1e3, "lag-p99-µs")
			b.ReportMetric(l.Max*1e3, "lag-max-µs")
		})
	}
}
