// Package publishers holds one publisher per broker and what they share: the Publisher contract the
// handlers drive, the error kinds the HTTP layer maps to status codes, and a metrics decorator.
package publishers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Publisher sends messages to one broker family. Host arguments index Hosts(); handlers choose the host
// so /send2Host and /send3Host can spread load deterministically.
//
// The contract lives here rather than in handlers because the metrics decorator consumes it too.
type Publisher interface {
	// Publish sends body to topic on host and returns once the broker acknowledged it.
	Publish(ctx context.Context, host int, topic string, body []byte) error
	// PublishBatch sends all bodies to topic on host as one unit (one batch command where the protocol has one) and returns once acknowledged.
	PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error
	// PublishAsync hands body to the broker client and returns without waiting for the broker. done is
	// called exactly once with the outcome, unless PublishAsync itself returns an error. It never waits
	// for the network on the caller's goroutine (/sendAsync answers at once): a publish that needs a
	// connection being made or a topic being looked up waits for it on a goroutine the publisher owns
	// (at most MaxAsyncWaiting per host; beyond it PublishAsync refuses with ErrUnavailable), and a
	// failure of that wait goes to done.
	PublishAsync(host int, topic string, body []byte, done func(error)) error
	// Hosts lists the broker addresses, in configuration order.
	Hosts() []string
	// Ping checks that host is reachable and accepting commands.
	Ping(ctx context.Context, host int) error
	// ValidateTopic reports whether name is a valid topic for this broker.
	ValidateTopic(name string) error
	// Close stops the publisher; it is idempotent.
	Close() error
}

// MaxAsyncWaiting bounds a host's async publishes waiting for a connection or a topic look-up (see
// Publisher.PublishAsync): above the handlers' default async.max_in_flight, so only a larger setting
// meets it.
const MaxAsyncWaiting = 16384

// AsyncWaiting counts one host's async publishes waiting on a goroutine their publisher owns, for the
// bound Publisher.PublishAsync promises: each holds its message. The zero value allows MaxAsyncWaiting.
type AsyncWaiting struct {
	n     atomic.Int64
	limit int64 // 0: MaxAsyncWaiting; set before use (SetLimit)
}

// Take counts one more waiting publish: false, counting nothing, when the host has its limit waiting
// already (refuse it with Refusal). A true must be matched by one Done.
func (w *AsyncWaiting) Take() bool {
	if w.n.Add(1) > w.Limit() {
		w.n.Add(-1)
		return false
	}
	return true
}

// Refusal is the error for a publish Take refused: ErrUnavailable, reading "who: N async publishes
// wait for what, the most allowed". Built only then, so Take's callers name the host for free.
func (w *AsyncWaiting) Refusal(who, what string) error {
	return Wrap(ErrUnavailable, fmt.Errorf("%s: %d async publishes wait for %s, the most allowed", who, w.Limit(), what))
}

// Done ends a wait Take counted.
func (w *AsyncWaiting) Done() { w.n.Add(-1) }

// Len is how many wait now.
func (w *AsyncWaiting) Len() int64 { return w.n.Load() }

// Limit is how many may wait at once.
func (w *AsyncWaiting) Limit() int64 {
	if w.limit > 0 {
		return w.limit
	}
	return MaxAsyncWaiting
}

// SetLimit changes the limit from MaxAsyncWaiting to n, before the first Take: for tests, which
// cannot hold 16384 publishes waiting cheaply.
func (w *AsyncWaiting) SetLimit(n int64) { w.limit = n }

// Error kinds. Publishers wrap broker errors with one of these so the HTTP layer can answer with the
// documented status code without knowing the broker.
var (
	// ErrUnavailable: the broker cannot be reached or the connection broke (503).
	ErrUnavailable = errors.New("broker unavailable")
	// ErrTimeout: the broker did not acknowledge within the publish timeout (504).
	ErrTimeout = errors.New("publish timed out")
	// ErrRejected: the broker answered with an error (502).
	ErrRejected = errors.New("broker rejected the message")
	// ErrClosed: the publisher is shutting down (503).
	ErrClosed = errors.New("publisher closed")
	// ErrTooLarge: the message exceeds the broker's size limit and was refused before it was sent (413).
	ErrTooLarge = errors.New("message too large for the broker")
)

// kindError attaches an error kind to the broker's own error, keeping both visible to errors.Is.
// The outer kind decides: a kind inside err (a connection lost for a rejected message: unavailable,
// its cause in the text) is hidden from errors.Is, so the answer's status is the one Wrap chose.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return fmt.Sprintf("%v: %v", e.kind, e.err) }
func (e *kindError) Unwrap() []error { return []error{e.kind, kindless{e.err}} }

// statusKinds are the kinds that choose an answer's status; ErrClosed, a state callers ask about,
// stays visible inside another kind.
var statusKinds = []error{ErrUnavailable, ErrTimeout, ErrRejected, ErrTooLarge}

// kindless is err without the status kinds it carries, for errors.Is; its text and other causes stay.
type kindless struct{ err error }

func (k kindless) Error() string { return k.err.Error() }

func (k kindless) Is(target error) bool {
	for _, s := range statusKinds {
		if target == s {
			return false
		}
	}
	return errors.Is(k.err, target)
}

func (k kindless) As(target any) bool { return errors.As(k.err, target) }

func Wrap(kind, err error) error { return &kindError{kind: kind, err: err} }

// ctxErr converts a context's error into ErrTimeout (deadline) or the cancellation itself.
func CtxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Wrap(ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}

// Ended reports whether ctx is done or its deadline has passed: a socket deadline set from ctx can fire
// a moment before ctx's own timer does, and what failed on it failed because ctx ended.
func Ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// Result classifies err for metrics labels.
func Result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrRejected), errors.Is(err, ErrTooLarge):
		return "rejected"
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrClosed):
		return "unavailable"
	case errors.Is(err, context.Canceled):
		return "canceled"
	default:
		return "error"
	}
}

// NameChars is the set of bytes a broker allows in its names. Topics are checked on every request, and
// a table lookup per byte costs nanoseconds where the equivalent regexp cost half a microsecond (a CPU
// profile of /send1 under wrk).
type NameChars [256]bool

// newNameChars allows ASCII letters, digits and the bytes of extra.
func NewNameChars(extra string) *NameChars {
	var c NameChars
	for b := '0'; b <= '9'; b++ {
		c[b] = true
	}
	for b := 'a'; b <= 'z'; b++ {
		c[b], c[b-'a'+'A'] = true, true
	}
	for i := 0; i < len(extra); i++ {
		c[extra[i]] = true
	}
	return &c
}

// all reports whether s is non-empty and holds only allowed bytes.
func (c *NameChars) All(s string) bool {
	for i := 0; i < len(s); i++ {
		if !c[s[i]] {
			return false
		}
	}
	return s != ""
}

// Together returns a done for n outcomes that calls done once, when all came, with the first error:
// a batch whose messages are acknowledged one by one.
func Together(n int, done func(error)) func(error) {
	var mu sync.Mutex
	var first error
	left := n
	return func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		left--
		last, res := left == 0, first
		mu.Unlock()
		if last {
			done(res)
		}
	}
}
