package publishers

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqtarget/mqtarget/internal/lograte"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// limitLog is log with every line rate-limited per host and cause (lograte): the first of each, then
// at most one per lograte.Interval with the number suppressed. Each publisher and consumer limits its
// own lines, the connection core's and its client library's among them.
func LimitLog(log *slog.Logger) *slog.Logger {
	return lograte.Logger(log, lograte.New(lograte.Interval))
}

// Backoff is the redial policy every broker connection follows (the pools, the brokers' own send
// paths, the consumers): after the n-th consecutive failure the next
// dial waits b/2 plus a random part of b/2 (equal jitter), b = min(Max, Base·2^(n-1)), so hosts that
// fail together do not redial in step, and a wait is never shorter than b/2.
//
// A failure is a dial or handshake that failed, and also a connection lost before it proved itself: a
// broker that accepts, handshakes and closes would otherwise be redialled at once, over and over. A
// connection that lived Healthy proved itself: its loss is redialled at once and starts the count
// afresh. One lost younger that answered a command (a broker that closes the connection after an
// error answer to a send, as some protocols require) is redialled at once too, up to ChurnBurst in a
// row and then one per Churn (a token bucket): more often (a broker that answers one command per
// connection, or fails every send on a full disk) it is a failure. The burst lets a few refusals in a
// row (a /send2Topic, the sends of one request) cost the host's other destinations no backoff, and
// keeps the immediate redials of any window at most ChurnBurst + window/Churn.
type Backoff struct {
	Base, Max, Healthy, Churn time.Duration
	ChurnBurst                int // below 1: 1
}

// DefaultBackoff: 100 ms doubling to 2 s; a connection is healthy after 2 s; a young one that
// answered is replaced at once 5 times in a row, then at most every 100 ms.
func DefaultBackoff() Backoff {
	return Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second, Healthy: 2 * time.Second, Churn: 100 * time.Millisecond, ChurnBurst: 5}
}

// wait is the pause after the n-th consecutive failure (n ≥ 1).
func (b Backoff) Wait(n int) time.Duration {
	d := b.Max
	if n <= 30 && b.Base<<(n-1) < b.Max {
		d = b.Base << (n - 1)
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// redial is one host's (or consumer session's) backoff state.
type Redial struct {
	failures int
	err      error     // the last failure: what callers get until retryAt
	retryAt  time.Time // no dial before it
	// churnDue is when the churn budget is next whole again (a GCRA's theoretical arrival time): an
	// immediate replacement at now is allowed while churnDue - now ≤ (ChurnBurst-1)·Churn, and moves it
	// on by Churn. The zero value is a full budget.
	churnDue time.Time
}

// check returns the error to fail with instead of dialling, nil when a dial may start.
func (r *Redial) Check(now time.Time) error {
	if r.err != nil && now.Before(r.retryAt) {
		return r.err
	}
	return nil
}

// failed records a failure: no dial for the wait it returns.
func (r *Redial) Failed(b Backoff, now time.Time, err error) time.Duration {
	r.failures++
	w := b.Wait(r.failures)
	r.err, r.retryAt = err, now.Add(w)
	return w
}

// lost records the loss of a connection that lived lived and answered a command or not: a failure
// unless it proved itself (see Backoff). It returns the wait (0: redial at once).
func (r *Redial) Lost(b Backoff, now time.Time, lived time.Duration, answered bool, err error) time.Duration {
	switch {
	case lived >= b.Healthy:
		r.failures, r.err = 0, nil
		return 0
	case answered && r.churn(b, now):
		return 0
	}
	return r.Failed(b, now, err)
}

// churn spends one immediate replacement of a young connection that answered, when the budget allows.
func (r *Redial) churn(b Backoff, now time.Time) bool {
	due := r.churnDue
	if due.Before(now) {
		due = now
	}
	if due.Sub(now) > time.Duration(max(b.ChurnBurst, 1)-1)*b.Churn {
		return false
	}
	r.churnDue = due.Add(b.Churn)
	return true
}

// AnswerMark notes whether a connection answered a command: proof that the broker works, whatever the
// connection's age. The read loop sets it; the pool reads it when the connection is found dead.
type AnswerMark struct{ seen atomic.Bool }

func (m *AnswerMark) Answered() bool { return m.seen.Load() }

// marking wraps a connection's answer reader so that every answer to a command marks m.
func (m *AnswerMark) Marking(read func(*bufio.Reader) (wire.Answer, error)) func(*bufio.Reader) (wire.Answer, error) {
	return func(r *bufio.Reader) (wire.Answer, error) {
		a, err := read(r)
		if err == nil && a.Kind != wire.None && !m.seen.Load() {
			m.seen.Store(true)
		}
		return a, err
	}
}

// answeredLink is implemented by the pool's links that note their answers (AnswerMark).
type answeredLink interface{ Answered() bool }

// linkAnswered reports whether l noted an answer; false for a link that does not tell.
// lostErr is the error of a connection to what lost lived after it was made; cause, when known, is
// why it ended, so a publish refused during the backoff still says (a protocol violation, say).
func LostErr(what string, lived time.Duration, cause error) error {
	if cause == nil {
		return fmt.Errorf("%s: connection lost %v after it was made; redialling with backoff", what, lived.Round(time.Millisecond))
	}
	return fmt.Errorf("%s: connection lost %v after it was made (%w); redialling with backoff", what, lived.Round(time.Millisecond), cause)
}

// linkCause is why l ended, when it says (wire.Conn.Err); nil otherwise.
func LinkCause(l any) error {
	if e, ok := l.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}

func LinkAnswered(l any) bool {
	a, ok := l.(answeredLink)
	return ok && a.Answered()
}

// PingReuse is how long a health check's result (Ping) may answer for its host: /readyz pings every
// host per request, and without it each request would make a broker connection of its own.
const PingReuse = time.Second

// PingLimit runs at most one health check per host at a time and reuses its result for PingReuse
// unless the host's connections showed news since (a dial or a loss: events), so the connections Ping
// makes are bounded whatever the rate of /readyz requests, and a broker that went down is seen by the
// next check once a publish met it. The zero value is ready.
type PingLimit struct {
	mu    sync.Mutex
	hosts map[int]*pingState
}

type pingState struct {
	at      time.Time     // when err was learned; zero: never
	events  uint64        // the host's events then
	err     error         // the last check's result
	running chan struct{} // closed when the check in progress ends; nil: none
}

// do returns host's last result if it is recent and nothing happened to the host's connections since
// (events: nil, results are never reused), waits for a check in progress, or runs check.
func (l *PingLimit) Do(ctx context.Context, host int, events func(int) uint64, check func(context.Context, int) error) error {
	for {
		l.mu.Lock()
		if l.hosts == nil {
			l.hosts = map[int]*pingState{}
		}
		st := l.hosts[host]
		if st == nil {
			st = &pingState{}
			l.hosts[host] = st
		}
		if st.running == nil && !st.at.IsZero() && time.Since(st.at) < PingReuse && events != nil && events(host) == st.events {
			err := st.err
			l.mu.Unlock()
			return err
		}
		if running := st.running; running != nil {
			l.mu.Unlock()
			select {
			case <-running: // its result, or a turn of our own when its caller left
			case <-ctx.Done():
				return CtxErr(ctx)
			}
			continue
		}
		running := make(chan struct{})
		st.running = running
		l.mu.Unlock()
		err := check(ctx, host)
		l.mu.Lock()
		if ctx.Err() == nil && events != nil { // a caller that left says nothing about the host
			st.at, st.events, st.err = time.Now(), events(host), err
		}
		st.running = nil
		close(running)
		l.mu.Unlock()
		return err
	}
}
