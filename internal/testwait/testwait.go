// Package testwait polls a test's condition until it holds, with a deadline, instead of sleeping for a
// guessed time: the tests of several packages wait so for a state another goroutine or process reaches.
package testwait

import (
	"testing"
	"time"
)

// interval is how often For polls: short against every deadline its callers use.
const interval = 5 * time.Millisecond

// ioInterval is how often Until polls: its f usually does I/O (a publish, a request, a broker's tool),
// which a busy machine should not be flooded with.
const ioInterval = 20 * time.Millisecond

// For polls cond until it holds and fails t, naming what it waited for, when within passes first.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v", what, within)
		}
	}
}

// Until polls f until it returns nil and fails t when within passes first, naming what it waited for
// and f's last error: a wait that gives up says why the last try failed, not only that it did.
func Until(t testing.TB, within time.Duration, what string, f func() error) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(ioInterval) {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v (last: %v)", what, within, err)
		}
	}
}

// Receive takes n values from ch and fails t, naming what they are and how many are missing, when they
// have not all come within within: for a test's callbacks (async publishes' dones) that report on a
// channel.
func Receive[T any](t testing.TB, within time.Duration, what string, ch <-chan T, n int) []T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	got := make([]T, 0, n)
	for len(got) < n {
		select {
		case v := <-ch:
			got = append(got, v)
		case <-timer.C:
			t.Fatalf("waiting for %s: %d of %d not within %v", what, n-len(got), n, within)
		}
	}
	return got
}
