package publishers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackoffWait: the waits double from Base to Max, each within [b/2, b] (equal jitter).
func TestBackoffWait(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	for _, tc := range []struct {
		n       int
		nominal time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {5, 1600 * time.Millisecond}, {6, 2 * time.Second}, {64, 2 * time.Second}, {1 << 20, 2 * time.Second}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			lo, hi := tc.nominal, time.Duration(0)
			for range 1000 {
				w := b.Wait(tc.n)
				lo, hi = min(lo, w), max(hi, w)
			}
			if lo < tc.nominal/2 || hi > tc.nominal || hi-lo < tc.nominal/4 {
				t.Errorf("waits within [%v, %v], want spread over [%v, %v]", lo, hi, tc.nominal/2, tc.nominal)
			}
		})
	}
}

// TestRedialLost: a connection lost young counts as a failure unless it answered (at most once per
// Churn); one that lived Healthy resets the count.
func TestRedialLost(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second, Healthy: 2 * time.Second, Churn: 100 * time.Millisecond}
	t0 := time.Unix(1000, 0)
	errLost := errors.New("lost")
	var r Redial
	steps := []struct {
		name     string
		at       time.Duration
		lived    time.Duration
		answered bool
		wait     bool // the next dial waits
		failures int
	}{
		{"young, unanswered", 0, time.Millisecond, false, true, 1},
		{"young again", time.Second, time.Millisecond, false, true, 2},
		{"young, answered: at once", 2 * time.Second, time.Millisecond, true, false, 2},
		{"young, answered, within Churn", 2*time.Second + 50*time.Millisecond, time.Millisecond, true, true, 3},
		{"young, answered, past Churn", 3 * time.Second, time.Millisecond, true, false, 3},
		{"healthy: afresh", 10 * time.Second, 2 * time.Second, false, false, 0},
		{"young after healthy: the first wait", 11 * time.Second, 0, false, true, 1},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		w := r.Lost(b, now, s.lived, s.answered, errLost)
		if (w > 0) != s.wait || r.failures != s.failures {
			t.Fatalf("%s: wait %v, failures %d; want wait %v, failures %d", s.name, w, r.failures, s.wait, s.failures)
		}
		if err := r.Check(now); (err != nil) != s.wait {
			t.Fatalf("%s: check %v", s.name, err)
		}
		if err := r.Check(now.Add(w)); err != nil {
			t.Fatalf("%s: check after the wait: %v", s.name, err)
		}
	}
}

// TestRedialChurnBurst: young connections that answered are replaced at once ChurnBurst times in a
// row, then one per Churn (the rest wait like failures), and the budget refills with time; over any
// window the immediate replacements stay within ChurnBurst + window/Churn.
func TestRedialChurnBurst(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second, Healthy: 2 * time.Second, Churn: 100 * time.Millisecond, ChurnBurst: 3}
	t0 := time.Unix(1000, 0)
	errLost := errors.New("lost")
	steps := []struct {
		name string
		at   time.Duration
		now  bool // replaced at once
	}{
		{"first", 0, true},
		{"second, same instant", 0, true},
		{"third, same instant", 0, true},
		{"fourth: over the burst", 0, false},
		{"one Churn later: one more", 100 * time.Millisecond, true},
		{"right after it: none", 110 * time.Millisecond, false},
		{"a second idle: the whole burst again", 1100 * time.Millisecond, true},
		{"its second", 1100 * time.Millisecond, true},
		{"its third", 1100 * time.Millisecond, true},
		{"its fourth: over", 1100 * time.Millisecond, false},
	}
	var r Redial
	for _, s := range steps {
		r.failures, r.err = 0, nil // the failures' own backoff is TestRedialLost's
		if w := r.Lost(b, t0.Add(s.at), time.Millisecond, true, errLost); (w == 0) != s.now {
			t.Fatalf("%s: wait %v, want at once: %v", s.name, w, s.now)
		}
	}

	for _, burst := range []int{0, 1, 5} {
		b.ChurnBurst = burst
		var r Redial
		var at []time.Duration // the immediate replacements
		now := time.Duration(0)
		for range 5000 {
			now += time.Duration(rand.N(40)) * time.Millisecond
			if r.Lost(b, t0.Add(now), time.Millisecond, true, errLost) == 0 {
				at = append(at, now)
			}
		}
		for i := range at {
			for j := i; j < len(at); j++ {
				window := at[j] - at[i]
				if n, limit := j-i+1, max(burst, 1)+int(window/b.Churn); n > limit {
					t.Fatalf("burst %d: %d immediate replacements within %v, want at most %d", burst, n, window, limit)
				}
			}
		}
		if len(at) < int(now/b.Churn)/2 {
			t.Fatalf("burst %d: %d immediate replacements in %v, want about one per Churn", burst, len(at), now)
		}
	}
}

// TestPingLimit: concurrent checks of a host share one run and its result is reused for PingReuse;
// news of the host (events) or none to tell (nil) makes a run of its own; a result of a caller that
// left is not kept; hosts are apart.
func TestPingLimit(t *testing.T) {
	var l PingLimit
	var runs atomic.Int64
	release := make(chan struct{})
	errDown := errors.New("down")
	var news atomic.Uint64
	events := func(int) uint64 { return news.Load() }
	check := func(ctx context.Context, host int) error {
		runs.Add(1)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return errDown
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() { errs[i] = l.Do(context.Background(), 0, events, check) })
	}
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond) // polling: until the first check runs
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != errDown {
			t.Errorf("caller %d: %v, want the shared result", i, err)
		}
	}
	if err := l.Do(context.Background(), 0, events, check); err != errDown || runs.Load() != 1 {
		t.Errorf("within PingReuse: %v after %d runs, want the kept result after 1", err, runs.Load())
	}
	news.Add(1)
	if err := l.Do(context.Background(), 0, events, check); err != errDown || runs.Load() != 2 {
		t.Errorf("after news of the host: %v after %d runs, want a run of its own (2)", err, runs.Load())
	}
	if err := l.Do(context.Background(), 0, nil, check); err != errDown || runs.Load() != 3 {
		t.Errorf("without news: %v after %d runs, want a run of its own (3)", err, runs.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Do(ctx, 1, events, check); !errors.Is(err, context.Canceled) {
		t.Errorf("host 1, caller gone: %v", err)
	}
	if err := l.Do(context.Background(), 1, events, check); err != errDown || runs.Load() != 5 {
		t.Errorf("host 1 after a caller that left: %v after %d runs, want a run of its own (5)", err, runs.Load())
	}
}
