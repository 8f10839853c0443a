package handlers

import (
	"context"
	"sync/atomic"
	"time"
)

// asyncLimiter bounds the async publishes awaiting the broker and counts their outcomes, so /sendAsync
// answers 429 at once when full instead of queueing without limit, and shutdown can wait for the rest.
type asyncLimiter struct {
	limit    int64
	inFlight atomic.Int64
	closed   atomic.Bool

	accepted, rejected, acked, failed atomic.Int64
}

// AsyncStats are the async outcome counts since start.
type AsyncStats struct {
	Accepted  int64 `json:"accepted"`  // handed to a publisher
	Rejected  int64 `json:"rejected"`  // refused with 429 because the limit was reached
	Acked     int64 `json:"acked"`     // acknowledged by the broker
	Failed    int64 `json:"failed"`    // the broker or the connection failed them
	Abandoned int64 `json:"abandoned"` // still in flight when a drain gave up
}

// acquire takes a slot; false means the limit is reached (or the limiter is closed).
func (l *asyncLimiter) acquire() bool {
	// Take the slot before checking closed: drain sets closed before it reads inFlight, so either drain
	// sees this slot and waits for it, or this call sees closed and backs out.
	n := l.inFlight.Add(1)
	if l.closed.Load() {
		l.inFlight.Add(-1)
		return false
	}
	if n > l.limit {
		l.inFlight.Add(-1)
		l.rejected.Add(1)
		return false
	}
	return true
}

// cancel gives a slot back when the publish was never started.
func (l *asyncLimiter) cancel() { l.inFlight.Add(-1) }

// accept records that the publish was handed over; its slot is released by done.
func (l *asyncLimiter) accept() { l.accepted.Add(1) }

// done releases a slot with the publish outcome.
func (l *asyncLimiter) done(err error) {
	if err == nil {
		l.acked.Add(1)
	} else {
		l.failed.Add(1)
	}
	l.inFlight.Add(-1)
}

// drain refuses new work and waits until nothing is in flight or ctx ends.
func (l *asyncLimiter) drain(ctx context.Context) AsyncStats {
	l.closed.Store(true)
	// Polling keeps the hot path free of the signalling a blocking wait would need.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for l.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			st := l.stats()
			st.Abandoned = l.inFlight.Load()
			return st
		case <-tick.C:
		}
	}
	return l.stats()
}

func (l *asyncLimiter) stats() AsyncStats {
	return AsyncStats{Accepted: l.accepted.Load(), Rejected: l.rejected.Load(), Acked: l.acked.Load(), Failed: l.failed.Load()}
}
