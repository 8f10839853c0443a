package handlers

import (
	"math"
	"testing"
)

func TestWantsHTML(t *testing.T) {
	for _, tc := range []struct {
		name   string
		accept []string
		want   bool
	}{
		{"none", nil, false},
		{"curl", []string{"*/*"}, false},
		{"json", []string{"application/json"}, false},
		{"chromium", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"}, true},
		{"firefox", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, true},
		{"html only", []string{"text/html"}, true},
		{"tie keeps json", []string{"text/html, application/json"}, false},
		{"json preferred", []string{"text/html;q=0.5, application/json"}, false},
		{"html preferred", []string{"application/json;q=0.5", "text/html"}, true},
		{"html refused", []string{"text/html;q=0, */*"}, false},
		{"application wildcard", []string{"text/html;q=0.4, application/*;q=0.5"}, false},
		{"case and spaces", []string{" TEXT/HTML ; Q=0.9 , */*;q=0.1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := wantsHTML(tc.accept); got != tc.want {
				t.Errorf("wantsHTML(%q) = %v, want %v", tc.accept, got, tc.want)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, tc := range []struct {
		name string
		cum  []uint64
		n    uint64
		q    float64
		want float64
	}{
		{"middle of a bucket", []uint64{0, 10, 10}, 10, 0.5, 1.5},
		{"first bucket from 0", []uint64{10, 10, 10}, 10, 0.5, 0.5},
		{"upper end", []uint64{0, 10, 10}, 10, 1, 2},
		{"spread", []uint64{5, 5, 10}, 10, 0.9, 2 + 2*0.8},
		{"beyond the last bound", []uint64{0, 0, 0}, 5, 0.5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.q, bounds, tc.cum, tc.n); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}
