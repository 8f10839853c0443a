package handlers

import (
	"context"
	"sync/atomic"
	"time"
)

// deadlineSlack is how much later than publish_timeout a publish's deadline may fall: the requests that
// start within it share one context.
const deadlineSlack = time.Millisecond

// deadlines hands out the contexts publishes run under: detached from the client and ending
// publish_timeout (plus at most deadlineSlack) after the request. A context with its own timer per
// request cost about 0.7 µs and four allocations of a /send1 (CPU profile under wrk, docs/benchmarks.md);
// the requests of one millisecond share one instead.
type deadlines struct {
	timeout time.Duration
	cur     atomic.Pointer[sharedDeadline]
}

type sharedDeadline struct {
	ctx context.Context
	at  time.Time
	// cancel is never called: the context ends by itself at at, and requests may hold it until then.
	cancel context.CancelFunc
}

// get returns a context whose deadline lies in [now+timeout, now+timeout+deadlineSlack].
func (d *deadlines) get() context.Context {
	want := time.Now().Add(d.timeout)
	if s := d.cur.Load(); s != nil && !s.at.Before(want) && s.at.Sub(want) <= deadlineSlack {
		return s.ctx
	}
	s := &sharedDeadline{at: want.Add(deadlineSlack)}
	s.ctx, s.cancel = context.WithDeadline(context.Background(), s.at)
	// Racing stores are harmless: each context is right for the requests that got it.
	d.cur.Store(s)
	return s.ctx
}
