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
	maxBytes int64 // bounds the message bytes held for publishes in flight; 0: no bound
	inFlight atomic.Int64
	bytes    atomic.Int64
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

// acquire takes a slot for a message of size bytes; false means a limit is reached (or the limiter is
// closed). The count alone let a client pick the bytes held: 10000 × 1 MiB.
func (l *asyncLimiter) acquire(size int) bool {
	// Take the slot before checking closed: drain sets closed before it reads inFlight, so either drain
	// sees this slot and waits for it, or this call sees closed and backs out.
	n := l.inFlight.Add(1)
	b := l.bytes.Add(int64(size))
	if l.closed.Load() {
		l.cancel(size)
		return false
	}
	if n > l.limit || (l.maxBytes > 0 && b > l.maxBytes) {
		l.cancel(size)
		l.rejected.Add(1)
		return false
	}
	return true
}

// cancel gives a slot back when the publish was never started.
func (l *asyncLimiter) cancel(size int) {
	l.inFlight.Add(-1)
	l.bytes.Add(-int64(size))
}

// accept records that the publish was handed over; its slot is released by done.
func (l *asyncLimiter) accept() { l.accepted.Add(1) }

// done releases the slot of a message of size bytes with the publish outcome.
func (l *asyncLimiter) done(err error, size int) {
	if err == nil {
		l.acked.Add(1)
	} else {
		l.failed.Add(1)
	}
	l.cancel(size)
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
