package testwait

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatalT records Fatalf instead of ending the test, so For's failure can be checked.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f) // Fatalf does not return
}

// fails runs wait with a fatalT and returns its failure message ("" when wait returned).
func fails(t *testing.T, wait func(testing.TB)) (msg string) {
	t.Helper()
	f := &fatalT{TB: t}
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
		msg = f.msg
	}()
	wait(f)
	return ""
}

func TestFor(t *testing.T) {
	t.Run("holds after a few polls", func(t *testing.T) {
		var n atomic.Int32
		For(t, 5*time.Second, "three polls", func() bool { return n.Add(1) >= 3 })
		if got := n.Load(); got != 3 {
			t.Errorf("cond called %d times, want 3", got)
		}
	})
	t.Run("never holds: fails naming it", func(t *testing.T) {
		f := &fatalT{TB: t}
		start := time.Now()
		func() {
			defer func() {
				if r := recover(); r != f {
					t.Fatalf("For did not fail: %v", r)
				}
			}()
			For(f, 50*time.Millisecond, "the impossible", func() bool { return false })
		}()
		if took := time.Since(start); took < 50*time.Millisecond {
			t.Errorf("failed after %v, before its deadline", took)
		}
		if !strings.Contains(f.msg, "the impossible") {
			t.Errorf("failure %q does not name what it waited for", f.msg)
		}
	})
}

func TestUntil(t *testing.T) {
	t.Run("returns once f succeeds", func(t *testing.T) {
		var n atomic.Int32
		msg := fails(t, func(tb testing.TB) {
			Until(tb, 5*time.Second, "three tries", func() error {
				if n.Add(1) < 3 {
					return errors.New("not yet")
				}
				return nil
			})
		})
		if msg != "" || n.Load() != 3 {
			t.Errorf("failed with %q after %d tries, want success at the third", msg, n.Load())
		}
	})
	t.Run("never succeeds: fails naming it and the last error", func(t *testing.T) {
		var n atomic.Int32
		start := time.Now()
		msg := fails(t, func(tb testing.TB) {
			Until(tb, 50*time.Millisecond, "the impossible", func() error {
				return fmt.Errorf("try %d refused", n.Add(1))
			})
		})
		if took := time.Since(start); took < 50*time.Millisecond {
			t.Errorf("failed after %v, before its deadline", took)
		}
		last := fmt.Sprintf("try %d refused", n.Load())
		if !strings.Contains(msg, "the impossible") || !strings.Contains(msg, last) {
			t.Errorf("failure %q does not name what it waited for and the last error (%q)", msg, last)
		}
	})
}

func TestReceive(t *testing.T) {
	t.Run("all come", func(t *testing.T) {
		ch := make(chan int, 3)
		go func() {
			for i := range 3 {
				ch <- i
			}
		}()
		var got []int
		if msg := fails(t, func(tb testing.TB) { got = Receive(tb, 5*time.Second, "three", ch, 3) }); msg != "" {
			t.Fatalf("failed: %s", msg)
		}
		if len(got) != 3 || got[0] != 0 || got[2] != 2 {
			t.Errorf("got %v, want [0 1 2]", got)
		}
	})
	t.Run("some missing: fails counting them", func(t *testing.T) {
		ch := make(chan int, 1)
		ch <- 1
		msg := fails(t, func(tb testing.TB) { Receive(tb, 50*time.Millisecond, "the dones", ch, 3) })
		if !strings.Contains(msg, "the dones: 2 of 3") {
			t.Errorf("failure %q, want it to name the dones and the 2 of 3 missing", msg)
		}
	})
}
