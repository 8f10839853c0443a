package publishers

import (
	"context"
	"testing"
	"time"
)

// TestEnded: done, or past its deadline though its timer has not fired yet.
func TestEnded(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancelPast()
	future, cancelFuture := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFuture()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"background", context.Background(), false},
		{"canceled", canceled, true},
		{"deadline passed", past, true},
		{"deadline ahead", future, false},
	} {
		if got := Ended(tc.ctx); got != tc.want {
			t.Errorf("%s: Ended = %v, want %v", tc.name, got, tc.want)
		}
	}
}
