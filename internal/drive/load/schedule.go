package load

import (
	"math"
	"math/big"
	"time"
)

// schedule is the open model's timetable: request k (from 0) is due offset(k) after the start, and n
// requests are due within the run. The warm-up's requests (the first warm) come at rate r0; then the
// measured part at r0, or ramping linearly from r0 to r1 over the duration.
type schedule struct {
	r0, r1           int64
	warmup, duration time.Duration
	warm, n          int64
}

func newSchedule(r0, r1 int64, warmup, duration time.Duration) schedule {
	s := schedule{r0: r0, r1: r1, warmup: warmup, duration: duration, warm: dueCount(warmup, r0)}
	if !s.ramp() {
		s.n = dueCount(warmup+duration, r0)
		return s
	}
	// The ramp's requests are those with N(t) < N(D), N(t) = r0·t + (r1-r0)·t²/(2D) being how many are
	// due by t: ceil((r0+r1)·D/2), with D in nanoseconds, exactly (the product passes int64).
	num := new(big.Int).Mul(big.NewInt(r0+r1), big.NewInt(int64(duration)))
	den := big.NewInt(2 * int64(time.Second))
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	s.n = s.warm + q.Int64()
	return s
}

func (s schedule) ramp() bool { return s.r1 > 0 && s.r1 != s.r0 }

// offset is when request k is due, after the start.
func (s schedule) offset(k int64) time.Duration {
	if !s.ramp() {
		return dueOffset(k, s.r0)
	}
	if k < s.warm {
		return dueOffset(k, s.r0)
	}
	// x requests are due by t where r0·t + a·t²/2 = x, a = (r1-r0)/D: t = 2x / (r0 + √(r0² + 2ax)), the
	// form that stays exact when a is small.
	x := float64(k - s.warm)
	r0 := float64(s.r0)
	a := float64(s.r1-s.r0) / s.duration.Seconds()
	t := 2 * x / (r0 + math.Sqrt(max(r0*r0+2*a*x, 0)))
	return s.warmup + min(time.Duration(t*float64(time.Second)), s.duration)
}
