package handlers

import (
	"context"
	"sync/atomic"
	"time"
)

// deadlines hands out the contexts publishes run under: detached from the client and ending
// publish_timeout (plus at most slack) after the request. A context with its own timer per request cost
// about 0.7 µs and four allocations of a /send1 (CPU profile under wrk, docs/benchmarks.md); the
// requests whose deadlines fall in the same slot (a slack-long span of monotonic time) share one instead.
//
// The contexts are kept per slot, not only the latest: GETs take their deadline from their start,
// POSTs from the end of their body, so under mixed load (or a saturated scheduler) the requests
// alternate between slots, and a single latest context would be replaced at every call, leaving one
// timer per request alive for publish_timeout.
type deadlines struct {
	timeout time.Duration
	// slack is a thousandth of the timeout, at least 1 ms: at most timeout/slack+1 ≤ 1001 slots hold a
	// deadline still to come, so at most about a thousand shared contexts are alive at once, whatever
	// publish_timeout is and however the requests interleave.
	slack time.Duration
	epoch time.Time // slots count from here on the monotonic clock, which wall-clock steps do not move
	// recent holds the latest context of each slot, at slot mod len(recent). It is longer than the
	// slots with a deadline still to come, so those never evict one another.
	recent [1024]atomic.Pointer[sharedDeadline]
}

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, slack: max(time.Millisecond, timeout/1000), epoch: time.Now()}
}

type sharedDeadline struct {
	ctx  context.Context
	slot int64
	// cancel is called only on a context no request got: the others end by themselves at their
	// deadline, and requests may hold them until then.
	cancel context.CancelFunc
}

// get returns a context whose deadline lies in [now+timeout, now+timeout+slack): the end of the slot
// now+timeout falls in.
func (d *deadlines) get(now time.Time) context.Context {
	want := now.Add(d.timeout)
	n := int64(want.Sub(d.epoch))
	slot := n / int64(d.slack)
	if slot*int64(d.slack) < n { // round up (division truncates towards 0, which rounds a negative n up)
		slot++
	}
	e := &d.recent[uint64(slot)%uint64(len(d.recent))]
	s := e.Load()
	if s != nil && s.slot == slot {
		return s.ctx
	}
	mine := &sharedDeadline{slot: slot}
	mine.ctx, mine.cancel = context.WithDeadline(context.Background(), want.Add(time.Duration(slot*int64(d.slack)-n)))
	for {
		switch {
		case s != nil && s.slot == slot: // another request stored this slot's meanwhile
			mine.cancel()
			return s.ctx
		case s != nil && s.slot > slot:
			// A slot len(recent) later: this deadline has passed (its context ended at once, with no
			// timer), and must not evict a live one.
			return mine.ctx
		case e.CompareAndSwap(s, mine):
			return mine.ctx
		}
		s = e.Load()
	}
}
