package main

import "testing"

func TestJudge(t *testing.T) {
	lim := Limit{Pct: 10, Abs: 5}
	tests := []struct {
		name    string
		samples []float64
		flat    bool
		judged  bool
	}{
		{"constant", []float64{100, 100, 100, 100, 100, 100, 100, 100, 100}, true, true},
		{"noise within the slack", []float64{100, 90, 120, 100, 130, 95, 110, 114, 100}, true, true},
		{"one spike in the last third", []float64{100, 100, 100, 100, 100, 100, 100, 400, 100}, true, true},
		{"steady growth", []float64{100, 105, 110, 115, 120, 125, 130, 135, 140}, false, true},
		{"shrinking is flat", []float64{200, 200, 200, 150, 150, 150, 100, 100, 100}, true, true},
		{"just past the limit", []float64{100, 100, 100, 100, 100, 100, 116, 116, 116}, false, true},
		{"too few samples", []float64{1, 2, 3}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.samples, lim)
			if (v.Err == nil) != tc.judged {
				t.Fatalf("judged = %v (%v), want %v", v.Err == nil, v.Err, tc.judged)
			}
			if v.Flat != tc.flat {
				t.Errorf("flat = %v (%s), want %v", v.Flat, v, tc.flat)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.xs); got != tc.want {
				t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
			}
		})
	}
}
