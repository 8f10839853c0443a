package testlane

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLockExcludes: tests holding one lane never overlap; tests of other lanes do.
func TestLockExcludes(t *testing.T) {
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			t.Run("same", func(t *testing.T) {
				Lock(t, "testlane-same")
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(20 * time.Millisecond) // while holding it: another holder would overlap
				inside.Add(-1)
			})
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d tests held lane at once, want 1", most.Load())
	}
	done := make(chan struct{})
	t.Run("other", func(t *testing.T) {
		Lock(t, "testlane-a")
		go func() {
			defer close(done)
			t.Run("b", func(t *testing.T) { Lock(t, "testlane-b") })
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("lane b waited for a holder of lane a")
		}
	})
}

// TestLockAgain: a test (or its subtest) taking a lane it holds goes on.
func TestLockAgain(t *testing.T) {
	Lock(t, "testlane-again")
	Lock(t, "testlane-again")
	t.Run("sub", func(t *testing.T) { Lock(t, "testlane-again") })
}
