package handlers

import (
	"context"
	"sync/atomic"
	"time"
)

// deadlines hands out the contexts publishes run under: detached from the client and ending
// publish_timeout (plus at most slack) after the request. A context with its own timer per request cost
// about 0.7 µs and four allocations of a /send1 (CPU profile under wrk, docs/benchmarks.md); the
// requests that start within slack of each other share one instead.
type deadlines struct {
	timeout time.Duration
	// slack is a thousandth of the timeout, at least 1 ms: under steady traffic at most about a
	// thousand shared contexts are alive at once, whatever publish_timeout is.
	slack time.Duration
	cur   atomic.Pointer[sharedDeadline]
}

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, slack: max(time.Millisecond, timeout/1000)}
}

type sharedDeadline struct {
	ctx context.Context
	at  time.Time
	// cancel is never called: the context ends by itself at at, and requests may hold it until then.
	cancel context.CancelFunc
}

// get returns a context whose deadline lies in [now+timeout, now+timeout+slack].
func (d *deadlines) get(now time.Time) context.Context {
	want := now.Add(d.timeout)
	if s := d.cur.Load(); s != nil && !s.at.Before(want) && s.at.Sub(want) <= d.slack {
		return s.ctx
	}
	s := &sharedDeadline{at: want.Add(d.slack)}
	s.ctx, s.cancel = context.WithDeadline(context.Background(), s.at)
	// Racing stores are harmless: each context is right for the requests that got it.
	d.cur.Store(s)
	return s.ctx
}
