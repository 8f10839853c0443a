package testwait

import (
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
	f.msg = format
	for _, a := range args {
		if s, ok := a.(string); ok {
			f.msg += " " + s
		}
	}
	panic(f) // Fatalf does not return
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
