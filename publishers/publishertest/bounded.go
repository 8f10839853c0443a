package publishertest

import (
	"errors"
	"runtime"
	"testing"
)

// BoundedRead is an input a broker reader must refuse as malformed (Malformed) after reading only its
// header: a size field from the broker never decides how much the reader allocates.
type BoundedRead struct {
	Name  string
	Input []byte
	Read  func([]byte) error
}

// RunBoundedReads runs each case: the read fails with malformed and allocates under 1 MiB.
func RunBoundedReads(t *testing.T, malformed error, cases []BoundedRead) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := tc.Read(tc.Input)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, malformed) {
				t.Errorf("got %v, want a malformed-frame error", err)
			}
			// The read buffer is 16 KiB; the margin is for what other goroutines allocate meanwhile.
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("allocated %d bytes", n)
			}
		})
	}
}
