// Package testwait polls a test's condition until it holds, with a deadline, instead of sleeping for a
// guessed time: the tests of several packages wait so for a state another goroutine or process reaches.
package testwait

import (
	"testing"
	"time"
)

// interval is how often For polls: short against every deadline its callers use.
const interval = 5 * time.Millisecond

// For polls cond until it holds and fails t, naming what it waited for, when within passes first.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v", what, within)
		}
	}
}
