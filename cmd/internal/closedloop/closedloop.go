// Package closedloop drives the anchor benchmarks' direct clients (cmd/bench-...): N senders, each
// sending one message, waiting for the broker's answer and sending the next, like wrk's connections.
package closedloop

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Options say how long to run and what to call.
type Options struct {
	Senders          int
	Warmup, Duration time.Duration
	// Send sends one message for sender and returns once the broker answered.
	Send func(sender int) error
	// Window, when set, runs as the measured window starts (true) and ends (false), on Run's goroutine.
	Window func(start bool)
}

// Result covers the sends that started after the warm-up and were answered within the measured window.
type Result struct {
	Rate     float64 // answered sends per second
	P50, P99 time.Duration
	Sent     int
	Failed   int
	FirstErr error
}

// String is the line the benchmark scripts read: "RATE P50_MS P99_MS FAILED SENT".
func (r Result) String() string {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("%.0f %.3f %.3f %d %d", r.Rate, ms(r.P50), ms(r.P99), r.Failed, r.Sent)
}

// Run runs o.Senders senders for o.Warmup + o.Duration and waits for all of them.
func Run(o Options) Result {
	start := time.Now()
	from, to := start.Add(o.Warmup), start.Add(o.Warmup+o.Duration)
	var (
		mu  sync.Mutex
		lat []time.Duration
		r   Result
		wg  sync.WaitGroup
	)
	for i := range o.Senders {
		wg.Go(func() {
			var mine []time.Duration
			failed := 0
			var first error
			for time.Now().Before(to) {
				t0 := time.Now()
				err := o.Send(i)
				t1 := time.Now()
				if t0.Before(from) || t1.After(to) {
					continue
				}
				if err != nil {
					failed++
					first = cmpOr(first, err)
					continue
				}
				mine = append(mine, t1.Sub(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			r.Failed += failed
			r.FirstErr = cmpOr(r.FirstErr, first)
		})
	}
	if o.Window != nil {
		time.Sleep(time.Until(from)) // a timed window, not synchronisation
		o.Window(true)
		time.Sleep(time.Until(to))
		o.Window(false)
	}
	wg.Wait()
	if len(lat) == 0 {
		return r
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	r.Sent = len(lat)
	r.Rate = float64(len(lat)) / o.Duration.Seconds()
	r.P50, r.P99 = pct(0.50), pct(0.99)
	return r
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
