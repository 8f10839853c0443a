package publishers

import (
	"errors"
	"fmt"
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
				w := b.wait(tc.n)
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
	var r redial
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
		w := r.lost(b, now, s.lived, s.answered, errLost)
		if (w > 0) != s.wait || r.failures != s.failures {
			t.Fatalf("%s: wait %v, failures %d; want wait %v, failures %d", s.name, w, r.failures, s.wait, s.failures)
		}
		if err := r.check(now); (err != nil) != s.wait {
			t.Fatalf("%s: check %v", s.name, err)
		}
		if err := r.check(now.Add(w)); err != nil {
			t.Fatalf("%s: check after the wait: %v", s.name, err)
		}
	}
}
