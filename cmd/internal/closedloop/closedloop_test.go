package closedloop

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunCountsOnlyTheWindow: sends answered inside the measured window count, failures apart from
// them, and the window callback brackets the measurement.
func TestRunCountsOnlyTheWindow(t *testing.T) {
	var calls atomic.Int64
	var window []bool
	boom := errors.New("boom")
	r := Run(Options{
		Senders: 2, Warmup: 50 * time.Millisecond, Duration: 100 * time.Millisecond,
		Send: func(sender int) error {
			time.Sleep(time.Millisecond)
			if calls.Add(1)%4 == 0 {
				return boom
			}
			return nil
		},
		Window: func(start bool) { window = append(window, start) },
	})
	total := int(calls.Load())
	if r.Sent == 0 || r.Failed == 0 || r.Sent+r.Failed >= total {
		t.Fatalf("sent %d failed %d of %d calls: want both counted and the warm-up's left out", r.Sent, r.Failed, total)
	}
	if !errors.Is(r.FirstErr, boom) {
		t.Errorf("first error %v, want %v", r.FirstErr, boom)
	}
	if len(window) != 2 || !window[0] || window[1] {
		t.Errorf("window callbacks %v, want [true false]", window)
	}
	if r.P50 <= 0 || r.P99 < r.P50 || r.Rate != float64(r.Sent)/0.1 {
		t.Errorf("p50 %v p99 %v rate %v for %d sends in 100ms", r.P50, r.P99, r.Rate, r.Sent)
	}
}
