package publishers_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
)

// TestAsyncWaiting: Take counts up to the limit and refuses past it, Refusal is unavailable naming who
// waits for what; a refused Take counts nothing, and Done frees a place.
func TestAsyncWaiting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64 // 0: the default
		want  int64
	}{
		{"default", 0, publishers.MaxAsyncWaiting},
		{"lowered", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w publishers.AsyncWaiting
			if tc.limit > 0 {
				w.SetLimit(tc.limit)
			}
			if w.Limit() != tc.want {
				t.Fatalf("Limit %d, want %d", w.Limit(), tc.want)
			}
			for i := range tc.want {
				if !w.Take() {
					t.Fatalf("Take %d of %d refused", i, tc.want)
				}
			}
			if w.Take() {
				t.Fatal("Take past the limit taken")
			}
			err := w.Refusal("host h", "a dial")
			if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "host h") || !strings.Contains(err.Error(), "wait for a dial") {
				t.Fatalf("Refusal: %v, want ErrUnavailable naming the host and the wait", err)
			}
			if w.Len() != tc.want {
				t.Fatalf("Len %d after a refused Take, want %d", w.Len(), tc.want)
			}
			w.Done()
			if !w.Take() {
				t.Fatal("Take after a Done refused")
			}
		})
	}
}
