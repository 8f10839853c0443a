package handlers

import (
	"context"
	"errors"
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
