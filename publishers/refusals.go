package publishers

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// RefusalFor is how long a topic a broker refused for want of permission is refused again without
// being sent; a permission granted meanwhile (a broker's reload) is seen after it.
const RefusalFor = 10 * time.Second

// MaxRefusals bounds the topics a Refusals remembers: past it the oldest is forgotten.
const MaxRefusals = 1024

// Refusals remembers, per host, the topics (or subjects) a broker refused for want of permission, so a
// load test against a forbidden topic does not make the broker refuse, and log, every request (and a
// broker that closes the connection with its refusal does not lose one per request). The zero value
// is ready; it is safe for concurrent use and costs one atomic load while it holds nothing.
type Refusals struct {
	n  atomic.Int32 // len(m)
	mu sync.Mutex
	m  map[string]refusal
}

type refusal struct {
	at  time.Time
	why string
}

// Add remembers key as refused now, for why (the broker's words).
func (r *Refusals) Add(key, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]refusal{}
	}
	if _, ok := r.m[key]; !ok && len(r.m) >= MaxRefusals {
		oldest, at := "", time.Time{}
		for k, v := range r.m {
			if oldest == "" || v.at.Before(at) {
				oldest, at = k, v.at
			}
		}
		delete(r.m, oldest)
	}
	r.m[key] = refusal{at: time.Now(), why: why}
	r.n.Store(int32(len(r.m)))
}

// Get returns why key was refused and how long ago, when that was within RefusalFor.
func (r *Refusals) Get(key string) (why string, ago time.Duration, ok bool) {
	if r.n.Load() == 0 {
		return "", 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	if !ok {
		return "", 0, false
	}
	if ago = time.Since(v.at); ago >= RefusalFor {
		delete(r.m, key)
		r.n.Store(int32(len(r.m)))
		return "", 0, false
	}
	return v.why, ago, true
}

// Has reports whether key was refused within RefusalFor.
func (r *Refusals) Has(key string) bool {
	_, _, ok := r.Get(key)
	return ok
}

// Refused is the error of a publish to key while its refusal is remembered, nil otherwise: broker and
// addr name where it would have gone, key what.
func (r *Refusals) Refused(key, broker, addr string) error {
	why, ago, ok := r.Get(key)
	if !ok {
		return nil
	}
	return Wrap(ErrRejected, fmt.Errorf("%s %s: %q not sent: the broker refused it for want of permission %v ago (%s); it is refused unsent for %v after each refusal",
		broker, addr, key, ago.Round(time.Millisecond), why, RefusalFor))
}
