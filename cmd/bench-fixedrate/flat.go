package main

import (
	"fmt"
	"slices"
)

// Limit is how much a sampled value may grow and still count as flat: the median of the last third of
// the samples after the warm-up may exceed the median of the first third by at most Pct percent of it
// plus Abs. Medians of thirds, not first against last sample, so one GC cycle or a burst of
// connections does not decide the verdict; the absolute slack keeps small values (a few dozen fds)
// from failing on one extra connection.
type Limit struct {
	Pct, Abs float64
}

// Verdict is the flatness check of one series.
type Verdict struct {
	First, Last float64 // medians of the first and last third
	Allowed     float64 // the largest Last that is flat
	Flat        bool
	Err         error // too few samples to judge
}

func (v Verdict) String() string {
	if v.Err != nil {
		return "NOT JUDGED: " + v.Err.Error()
	}
	word := "flat"
	if !v.Flat {
		word = "GREW"
	}
	return fmt.Sprintf("%s: first-third median %.1f, last-third median %.1f, allowed ≤ %.1f", word, v.First, v.Last, v.Allowed)
}

// minSamples is the fewest samples a verdict is given for: three per third.
const minSamples = 9

// Judge gives the verdict for samples (in time order, warm-up already left out).
func Judge(samples []float64, l Limit) Verdict {
	if len(samples) < minSamples {
		return Verdict{Err: fmt.Errorf("%d samples after the warm-up, need %d", len(samples), minSamples)}
	}
	third := len(samples) / 3
	v := Verdict{First: median(samples[:third]), Last: median(samples[len(samples)-third:])}
	v.Allowed = v.First*(1+l.Pct/100) + l.Abs
	v.Flat = v.Last <= v.Allowed
	return v
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
