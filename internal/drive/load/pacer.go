package load

import (
	"context"
	"runtime"
	"time"
)

// The open model's schedule: request k (from 0) is due at start + k/rate seconds, computed so that no
// product overflows for any rate <= MaxRate and duration <= MaxDuration.
func dueOffset(k, rate int64) time.Duration {
	return time.Duration(k/rate)*time.Second + time.Duration((k%rate)*int64(time.Second)/rate)
}

// dueCount is the number of requests due within d: those with k/rate < d.
func dueCount(d time.Duration, rate int64) int64 {
	whole, frac := int64(d/time.Second), int64(d%time.Second)
	return whole*rate + (frac*rate+int64(time.Second)-1)/int64(time.Second)
}

// pacer waits for due times. Go's timers wake up about 1 ms late when the process is otherwise idle (the
// netpoller waits in whole milliseconds): at 200 requests/s that lateness, billed to the target, doubled
// the p50. So the pacer waits in three steps: a timer (which ctx can end) until coarseMargin before the
// due time, a precise sleep (nanosleep on a thread whose timer slack is 1 µs, on Linux) until spinMargin
// before it, then a busy wait. Its goroutine is locked to its thread, which ends with it.
type pacer struct {
	timer *time.Timer
}

const (
	coarseMargin = 3 * time.Millisecond
	spinMargin   = 20 * time.Microsecond
)

// newPacer must be called on the pacing goroutine, which it locks to its thread for good: the thread's
// timer slack is changed, so it must not serve other goroutines after (an exiting locked goroutine
// takes its thread with it).
func newPacer() *pacer {
	runtime.LockOSThread()
	tightenTimerSlack()
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{timer: t}
}

// wait returns when due has come, or false when ctx ended first.
func (p *pacer) wait(ctx context.Context, due time.Time) bool {
	if d := time.Until(due) - coarseMargin; d > 0 {
		p.timer.Reset(d)
		select {
		case <-p.timer.C:
		case <-ctx.Done():
			p.timer.Stop()
			return false
		}
	} else if ctx.Err() != nil {
		return false
	}
	for {
		d := time.Until(due) - spinMargin
		if d <= 0 {
			break
		}
		preciseSleep(d) // may return early (a signal): then sleep again
	}
	for time.Now().Before(due) { //nolint:revive // a busy wait of at most spinMargin, on purpose
	}
	return true
}
