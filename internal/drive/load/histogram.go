package load

import (
	"errors"
	"fmt"
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

// HistogramScheme names the bucket layout of Histogram, so a merge refuses histograms of another.
const HistogramScheme = "log-linear-us/11"

// Histogram is a latency histogram as a result carries it, so results of several runs (shards of one
// load on several machines) can be merged into exact totals and percentiles (mqtarget report). Buckets
// are [index, count] pairs in ascending index order, only the non-empty ones: index i < 2048 holds
// durations of i µs (rounded to the nearest µs); above, 1024 buckets per power of two, so a percentile
// read from it is within 0.05 % of the exact one. Sum and max are exact, in nanoseconds.
type Histogram struct {
	Scheme  string     `json:"scheme"`
	Count   int64      `json:"count"`
	SumNS   int64      `json:"sum_ns"`
	MaxNS   int64      `json:"max_ns"`
	Buckets [][2]int64 `json:"buckets"`
}

// export is h as a Histogram.
func (h *histogram) export() *Histogram {
	e := &Histogram{Scheme: HistogramScheme, Count: h.n, SumNS: int64(h.sum), MaxNS: int64(h.max), Buckets: [][2]int64{}}
	for i, c := range h.counts {
		if c > 0 {
			e.Buckets = append(e.Buckets, [2]int64{int64(i), c})
		}
	}
	return e
}

// maxBucket is one past the largest bucket index bucketOf returns.
var maxBucket = bucketOf(1<<62) + 1

// merge adds e's counts to h, after checking that e is a histogram of this layout whose counts add up.
func (h *histogram) merge(e *Histogram) error {
	if e == nil {
		return errors.New("no histogram")
	}
	if e.Scheme != HistogramScheme {
		return fmt.Errorf("histogram scheme %q, want %q", e.Scheme, HistogramScheme)
	}
	if e.Count < 0 || e.SumNS < 0 || e.MaxNS < 0 {
		return errors.New("histogram: negative count, sum or max")
	}
	var n int64
	last := int64(-1)
	for _, b := range e.Buckets {
		if b[0] <= last || b[0] >= int64(maxBucket) || b[1] <= 0 {
			return fmt.Errorf("histogram: bucket [%d, %d] out of order, out of range or empty", b[0], b[1])
		}
		last = b[0]
		if n += b[1]; n < 0 || n > e.Count {
			return fmt.Errorf("histogram: buckets hold more than its count %d", e.Count)
		}
	}
	if n != e.Count {
		return fmt.Errorf("histogram: buckets hold %d, its count says %d", n, e.Count)
	}
	if h.n+e.Count < h.n || h.sum+time.Duration(e.SumNS) < h.sum {
		return errors.New("histogram: the merged count or sum overflows")
	}
	if need := int(last) + 1; need > len(h.counts) {
		grown := make([]int64, max(need, 1<<subBits))
		copy(grown, h.counts)
		h.counts = grown
	}
	for _, b := range e.Buckets {
		h.counts[b[0]] += b[1]
	}
	h.n += e.Count
	h.sum += time.Duration(e.SumNS)
	h.max = max(h.max, time.Duration(e.MaxNS))
	return nil
}
