// Package closedloop drives the anchor benchmarks' direct clients (cmd/bench-...): N senders, each
// sending one message, waiting for the broker's answer and sending the next, like wrk's connections.
// Every answered send's latency goes into a histogram (mqtarget load's, internal/drive/load.Recorder),
// so the percentiles of a direct client and of `mqtarget load` are computed alike, and the one result
// line all direct clients print is Result.String.
package closedloop

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// Options say how long to run and what to call.
type Options struct {
	Senders          int
	Warmup, Duration time.Duration
	// Send sends one message for sender and returns once the broker answered.
	Send func(sender int) error
	// Window, when set, runs as the measured window starts (true) and ends (false), on Run's goroutine.
	Window func(start bool)
	// Think is each sender's pause after an answer before its next send (0: none). A client behind
	// HTTP leaves such a gap (the reply to the load generator, its next request), and a broker that
	// goes idle in it may answer the next send later than one that is kept busy.
	Think time.Duration
}

// Bounds of a run, checked by Validate: the senders are goroutines with a connection each.
const (
	MaxSenders  = 10_000
	MaxDuration = time.Hour
	MaxThink    = time.Second
)

// Validate names the first bad option by the flag the direct clients give it (-c, -d, -warmup).
func (o Options) Validate() error {
	switch {
	case o.Senders < 1 || o.Senders > MaxSenders:
		return fmt.Errorf("-c: senders must be 1..%d, got %d", MaxSenders, o.Senders)
	case o.Duration <= 0 || o.Duration > MaxDuration:
		return fmt.Errorf("-d: must be > 0 and <= %v, got %v", MaxDuration, o.Duration)
	case o.Warmup < 0 || o.Warmup > MaxDuration:
		return fmt.Errorf("-warmup: must be 0..%v, got %v", MaxDuration, o.Warmup)
	case o.Think < 0 || o.Think > MaxThink:
		return fmt.Errorf("-think: must be 0..%v, got %v", MaxThink, o.Think)
	}
	return nil
}

// Result covers the sends that started after the warm-up and were answered within the measured window.
type Result struct {
	Duration time.Duration // the measured window
	Latency  load.Latency  // milliseconds
	Sent     int           // answered without error in the window
	Failed   int
	FirstErr error
	// CPU is this process's CPU time (user + system) within the measured window; 0 where unknown.
	CPU time.Duration
}

// Rate is the answered sends per second of the measured window.
func (r Result) Rate() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Duration.Seconds()
}

// String is the line the benchmark scripts read (scripts/lib/anchor-bench.sh, direct_run):
// "rate=R p50_ms=… p99_ms=… p999_ms=… max_ms=… failed=F sent=S", then " client_us=C" (the client's CPU
// time per answered send, in µs) when CPU is known.
func (r Result) String() string {
	l := r.Latency
	s := fmt.Sprintf("rate=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f failed=%d sent=%d",
		r.Rate(), l.P50, l.P99, l.P999, l.Max, r.Failed, r.Sent)
	if r.CPU > 0 && r.Sent > 0 {
		s += fmt.Sprintf(" client_us=%.1f", float64(r.CPU.Microseconds())/float64(r.Sent))
	}
	return s
}

// ErrNoSends is Check's error when no send was answered in the measured window.
var ErrNoSends = errors.New("no send completed in the measured window")

// Check is nil when at least one send was answered in the window.
func (r Result) Check() error {
	if r.Sent == 0 {
		if r.FirstErr != nil {
			return fmt.Errorf("%w (%d failed, the first: %w)", ErrNoSends, r.Failed, r.FirstErr)
		}
		return ErrNoSends
	}
	return nil
}

// Run runs o.Senders senders for o.Warmup + o.Duration and waits for all of them. A send that began in
// the warm-up or ended after the window is not counted.
func Run(o Options) Result {
	start := time.Now()
	from, to := start.Add(o.Warmup), start.Add(o.Warmup+o.Duration)
	var (
		mu  sync.Mutex
		all load.Recorder
		r   = Result{Duration: o.Duration}
		wg  sync.WaitGroup
	)
	for i := range o.Senders {
		wg.Go(func() {
			var mine load.Recorder // one per sender: no lock per send
			failed := 0
			var first error
			for time.Now().Before(to) {
				t0 := time.Now()
				err := o.Send(i)
				t1 := time.Now()
				if o.Think > 0 { // after every answer: in the warm-up and after a failure too
					time.Sleep(o.Think)
				}
				if t0.Before(from) || t1.After(to) {
					continue
				}
				if err != nil {
					failed++
					first = cmpOr(first, err)
					continue
				}
				mine.Add(t1.Sub(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			all.Merge(&mine)
			r.Failed += failed
			r.FirstErr = cmpOr(r.FirstErr, first)
		})
	}
	// A timed window, not synchronisation: the process's CPU over it is the client's cost of the sends
	// it counts (the anchors set it beside mqtarget's and the broker's, docs/benchmarks.md).
	time.Sleep(time.Until(from))
	if o.Window != nil {
		o.Window(true)
	}
	cpu0 := processCPU()
	time.Sleep(time.Until(to))
	if cpu1 := processCPU(); cpu0 > 0 && cpu1 > cpu0 {
		r.CPU = cpu1 - cpu0
	}
	if o.Window != nil {
		o.Window(false)
	}
	wg.Wait()
	r.Sent = int(all.Count())
	r.Latency = all.Latency()
	return r
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
