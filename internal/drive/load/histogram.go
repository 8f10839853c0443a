package load

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts durations in microseconds in log-linear buckets: exact below 2048 µs (the printed
// precision is 1 µs), then 1024 buckets per power of two, so a percentile above 2 ms is within 0.05 %.
// Its memory is bounded (at most about 32 000 buckets, 250 KiB, for durations up to 2^40 µs) however many
// requests a run sends: a closed-model run of hours keeps no per-request sample.
type histogram struct {
	counts []int64
	n      int64
	sum    time.Duration
	max    time.Duration
}

const (
	subBits    = 11 // 2048 exact buckets, then 1024 per power of two
	maxBitsLen = 40 // 2^40 µs ≈ 12.7 days; longer durations share the top bucket
)

func bucketOf(us int64) int {
	if us < 1<<subBits {
		return int(max(us, 0))
	}
	e := min(bits.Len64(uint64(us)), maxBitsLen) - subBits // us>>e is in [1024, 2048)
	m := us >> e
	if bits.Len64(uint64(us)) > maxBitsLen {
		m = 1<<subBits - 1
	}
	return e<<(subBits-1) + int(m)
}

// valueOf is the middle of bucket i in microseconds.
func valueOf(i int) int64 {
	if i < 1<<subBits {
		return int64(i)
	}
	e := i>>(subBits-1) - 1
	m := int64(i - e<<(subBits-1))
	return m<<e + 1<<(e-1)
}

func (h *histogram) add(d time.Duration) {
	d = max(d, 0)
	i := bucketOf(int64((d + 500) / time.Microsecond))
	if i >= len(h.counts) {
		grown := make([]int64, max(i+1, 2*len(h.counts), 1<<subBits))
		copy(grown, h.counts)
		h.counts = grown
	}
	h.counts[i]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// latency is the percentiles by the nearest-rank method; max and mean are exact.
func (h *histogram) latency() Latency {
	if h.n == 0 {
		return Latency{}
	}
	ranks := []float64{0.50, 0.90, 0.99, 0.999}
	vals := make([]float64, len(ranks))
	var cum int64
	j := 0
	for i, c := range h.counts {
		cum += c
		for j < len(ranks) && cum >= int64(math.Ceil(ranks[j]*float64(h.n))) {
			vals[j] = min(float64(valueOf(i))/1e3, ms(h.max)) // a bucket's middle can pass the max
			j++
		}
	}
	return Latency{P50: vals[0], P90: vals[1], P99: vals[2], P999: vals[3], Max: ms(h.max), Mean: ms(h.sum / time.Duration(h.n))}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 } // milliseconds, µs precision
