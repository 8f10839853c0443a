package handlers

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestDeadlines(t *testing.T) {
	const timeout = 50 * time.Millisecond
	d := newDeadlines(timeout)
	slack := d.slack

	t.Run("within publish_timeout plus the slack", func(t *testing.T) {
		for i := 0; i < 1000; i++ {
			before := time.Now()
			ctx := d.get(time.Now())
			after := time.Now()
			at, ok := ctx.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			if at.Before(before.Add(timeout)) || at.After(after.Add(timeout+slack)) {
				t.Fatalf("deadline %v after the call, want %v..%v", at.Sub(before), timeout, timeout+slack)
			}
		}
	})

	t.Run("one millisecond's requests share a context", func(t *testing.T) {
		// Retried: a call may straddle the end of a shared context's millisecond.
		for try := 0; ; try++ {
			if d.get(time.Now()) == d.get(time.Now()) {
				break
			}
			if try == 10 {
				t.Fatal("two immediate calls never shared a context")
			}
		}
	})

	t.Run("a later request gets a later deadline", func(t *testing.T) {
		first := d.get(time.Now())
		time.Sleep(3 * slack)
		second := d.get(time.Now())
		a, _ := first.Deadline()
		b, _ := second.Deadline()
		if !b.After(a) {
			t.Fatalf("deadline %v after %v", b, a)
		}
	})

	t.Run("slack is a thousandth of publish_timeout, at least 1 ms", func(t *testing.T) {
		for _, tc := range []struct {
			name           string
			timeout, slack time.Duration
		}{
			{"short timeout", 50 * time.Millisecond, time.Millisecond},
			{"default", 5 * time.Second, 5 * time.Millisecond},
			{"ten minutes", 10 * time.Minute, 600 * time.Millisecond},
		} {
			if got := newDeadlines(tc.timeout).slack; got != tc.slack {
				t.Errorf("%s: slack %v for %v, want %v", tc.name, got, tc.timeout, tc.slack)
			}
		}
	})

	t.Run("ends by itself at its deadline", func(t *testing.T) {
		ctx := d.get(time.Now())
		at, _ := ctx.Deadline()
		select {
		case <-ctx.Done():
			if time.Now().Before(at) {
				t.Fatalf("ended %v early", time.Until(at))
			}
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("err %v, want DeadlineExceeded", ctx.Err())
			}
		case <-time.After(10 * timeout):
			t.Fatal("not ended 10 × publish_timeout later")
		}
	})
}

// TestDeadlinesBounded: however the requests' start times interleave, the contexts still running (each
// holds a timer until its deadline) are at most about one per slack of the deadlines asked for, not one
// per request; and each deadline is still the request's own plus at most the slack, never earlier.
func TestDeadlinesBounded(t *testing.T) {
	const (
		timeout  = 5 * time.Second // slack 5 ms
		requests = 20000
		step     = 10 * time.Microsecond // between requests: 100k/s
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		// start is the start time of request i, from now; span bounds the spread of the start times of
		// the requests whose deadlines have not passed.
		start func(i int) time.Duration
		span  time.Duration
	}{
		{"steady", func(i int) time.Duration { return time.Duration(i) * step }, requests * step},
		// A GET's deadline runs from its start, a POST's from the end of its body.
		{"GETs queued 10 ms between POSTs", func(i int) time.Duration {
			return time.Duration(i/2)*step - time.Duration(i%2)*10*time.Millisecond
		}, requests/2*step + 10*time.Millisecond},
		{"saturated scheduler: started within 100 ms, in any order", func(int) time.Duration {
			return -time.Duration(rng.Int64N(int64(100 * time.Millisecond)))
		}, 100 * time.Millisecond},
		// The older half's deadlines have passed: their contexts end at once, without a timer, and
		// must not displace the live ones.
		{"started up to twice publish_timeout ago", func(int) time.Duration {
			return -time.Duration(rng.Int64N(int64(2 * timeout)))
		}, timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeadlines(timeout)
			now := time.Now()
			starts := make([]time.Time, requests)
			for i := range starts {
				starts[i] = now.Add(tc.start(i))
			}
			// Several goroutines at once, as the handlers call get, each taking its requests in order:
			// racing requests must not add contexts.
			const goroutines = 4
			got := make([]context.Context, requests)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := g * requests / goroutines; i < (g+1)*requests/goroutines; i++ {
						got[i] = d.get(starts[i])
					}
				})
			}
			wg.Wait()
			live := map[context.Context]bool{}
			for i, ctx := range got {
				at, _ := ctx.Deadline()
				if late := at.Sub(starts[i].Add(timeout)); late < 0 || late > d.slack {
					t.Fatalf("request %d: deadline %v after publish_timeout, want 0..%v", i, late, d.slack)
				}
				if ctx.Err() == nil {
					live[ctx] = true
				}
			}
			if most := int(tc.span/d.slack) + 2; len(live) > most {
				t.Errorf("%d contexts with a running timer after %d requests, want at most %d", len(live), requests, most)
			}
		})
	}
}

// BenchmarkDeadlines is get alone under steady traffic (almost every call shares a context).
func BenchmarkDeadlines(b *testing.B) {
	d := newDeadlines(time.Second)
	b.ReportAllocs()
	for b.Loop() {
		_ = d.get(time.Now())
	}
}
