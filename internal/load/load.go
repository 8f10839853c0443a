// Package load drives an HTTP endpoint in one of two models and summarises what came back: closed
// (C connections, each sending its next request when the previous answer arrived, like wrk) and open
// (R requests per second whatever the answers do, like wrk2). Open-model latency is measured from the
// request's intended send time, so a stall of the target shows in the percentiles instead of hiding
// behind the requests it delayed (coordinated omission). The attacker is vegeta's.
package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Model names.
const (
	Closed = "closed"
	Open   = "open"
)

// Options describe one run.
type Options struct {
	URL    string
	Method string // GET when empty
	Body   []byte
	// Exactly one of Rate (open model, requests per second) and Connections (closed model) is > 0.
	Rate        int
	Connections int
	// MaxWorkers bounds the open model's concurrent requests (0: DefaultMaxWorkers). Requests that wait
	// for a worker are late, and their latency counts from when they were due.
	MaxWorkers int
	Duration   time.Duration
	Timeout    time.Duration // per request; 0: DefaultTimeout
	// Progress, when set, is called about once a second with the counts so far, from Run's goroutine.
	Progress func(Progress)
	// Target is what the URL told about itself (Describe); it goes into the result's meta as is.
	Target *Target
	// Version is the version of this load generator, for the meta.
	Version string
}

// Defaults.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMaxWorkers = 10000
)

// Progress is the state of a run so far.
type Progress struct {
	Elapsed, Duration time.Duration
	Requests, OK      int64
}

// ValidateURL checks that u is an absolute http(s) URL with a host: the only place load sends to.
func ValidateURL(u string) (*url.URL, error) {
	p, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return nil, fmt.Errorf("%q: scheme must be http or https", u)
	}
	if p.Host == "" || p.Hostname() == "" {
		return nil, fmt.Errorf("%q: no host", u)
	}
	if p.Fragment != "" {
		return nil, fmt.Errorf("%q: a fragment is never sent; remove #%s", u, p.Fragment)
	}
	return p, nil
}

// Validate reports the first bad option, naming it as the load subcommand's flag.
func (o Options) Validate() error {
	if _, err := ValidateURL(o.URL); err != nil {
		return fmt.Errorf("URL: %w", err)
	}
	switch {
	case o.Rate < 0:
		return fmt.Errorf("-rate: must be > 0, got %d", o.Rate)
	case o.Connections < 0:
		return fmt.Errorf("-connections: must be > 0, got %d", o.Connections)
	case o.Rate > 0 && o.Connections > 0:
		return errors.New("-rate and -connections: give one (open or closed model), not both")
	case o.Rate == 0 && o.Connections == 0:
		return errors.New("-rate or -connections: one is required (open or closed model)")
	case o.MaxWorkers < 0:
		return fmt.Errorf("-max-workers: must be >= 0, got %d", o.MaxWorkers)
	case o.Duration <= 0:
		return fmt.Errorf("-duration: must be > 0, got %v", o.Duration)
	case o.Timeout < 0:
		return fmt.Errorf("-timeout: must be > 0, got %v", o.Timeout)
	}
	m := o.method()
	if m != http.MethodGet && m != http.MethodPost && m != http.MethodPut && m != http.MethodHead {
		return fmt.Errorf("-method: must be GET, POST, PUT or HEAD, got %q", o.Method)
	}
	return nil
}

func (o Options) method() string {
	if o.Method == "" {
		return http.MethodGet
	}
	return o.Method
}

// Model is Open or Closed.
func (o Options) Model() string {
	if o.Rate > 0 {
		return Open
	}
	return Closed
}

// Run sends the load for o.Duration (or until ctx ends) and summarises it.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	// Our own transport: no proxy from the environment (requests go where the URL says, nowhere else),
	// and its idle connections are closed when the run ends, so a long sweep does not pile them up.
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	transport := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: o.Connections}
	defer transport.CloseIdleConnections()
	opts := []func(*vegeta.Attacker){vegeta.Client(&http.Client{Transport: transport}),
		vegeta.Timeout(timeout), vegeta.Redirects(vegeta.NoFollow), vegeta.MaxBody(0)}
	var pacer vegeta.Pacer
	var interval time.Duration // the open model's schedule: request k is due at start + (k+1)*interval
	if o.Rate > 0 {
		maxWorkers := o.MaxWorkers
		if maxWorkers == 0 {
			maxWorkers = DefaultMaxWorkers
		}
		transport.MaxIdleConnsPerHost = maxWorkers
		opts = append(opts, vegeta.MaxWorkers(uint64(maxWorkers)), vegeta.Workers(uint64(min(maxWorkers, 10))))
		r := vegeta.Rate{Freq: o.Rate, Per: time.Second}
		pacer = r
		interval = time.Duration(time.Second.Nanoseconds() / int64(o.Rate)) // vegeta's own arithmetic
	} else {
		c := o.Connections
		// Rate 0 is "as fast as possible": each of the C workers sends its next request when its answer is in.
		opts = append(opts, vegeta.Workers(uint64(c)), vegeta.MaxWorkers(uint64(c)),
			vegeta.Connections(c), vegeta.MaxConnections(c))
		pacer = vegeta.Rate{Freq: 0, Per: time.Second}
	}
	atk := vegeta.NewAttacker(opts...)
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: o.method(), URL: o.URL, Body: o.Body})

	var acc accumulator
	start := time.Now() // just before vegeta's own start, so intended times are at most microseconds early
	results := atk.Attack(tr, pacer, o.Duration, "")

	// One goroutine, waited for below, stops the attack when ctx ends (a signal) and reports progress.
	var wg sync.WaitGroup
	var stopped atomic.Bool
	done := make(chan struct{})
	wg.Go(func() {
		var tick <-chan time.Time
		if o.Progress != nil {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				stopped.Store(true)
				atk.Stop() // the results still drain, so the workers end
				return
			case now := <-tick:
				req, ok := acc.counts()
				o.Progress(Progress{Elapsed: now.Sub(start), Duration: o.Duration, Requests: req, OK: ok})
			}
		}
	})
	for res := range results {
		lat := res.Latency
		if interval > 0 {
			due := start.Add(time.Duration(res.Seq+1) * interval)
			lat = res.End().Sub(due)
			if lat < res.Latency {
				lat = res.Latency // sent late is possible, early is not: clock rounding
			}
		}
		acc.add(res.Code, res.Error, lat)
	}
	end := time.Now()
	close(done)
	wg.Wait()

	r := acc.result(end.Sub(start))
	r.Meta = Meta{
		Version: o.Version, Cores: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0),
		Model: o.Model(), Rate: o.Rate, Connections: o.Connections, MaxWorkers: o.MaxWorkers,
		Duration: o.Duration.String(), Timeout: timeout.String(), Method: o.method(), BodyBytes: len(o.Body),
		Start: start.UTC(), End: end.UTC(), Target: o.Target,
	}
	r.Meta.setEndpoint(o.URL)
	if stopped.Load() {
		r.Meta.Interrupted = true
	} else if interval > 0 {
		// The attacker stops at the duration even when it is behind schedule (out of workers, or a
		// generator without CPU to spare): requests it never sent are not latencies, so they are counted.
		r.NotSent = max(int64(o.Duration/interval)-r.Requests, 0)
	}
	return r, nil
}

// accumulator gathers results as they arrive; the progress goroutine reads its counts.
type accumulator struct {
	mu        sync.Mutex
	requests  int64
	ok        int64
	byStatus  map[int]int64
	errors    int64
	errKinds  map[string]int64
	latencies []time.Duration // of every answered request (any status)
}

func (a *accumulator) add(code uint16, errText string, lat time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests++
	if code == 0 { // no HTTP answer: a transport error (refused, reset, timeout)
		a.errors++
		if a.errKinds == nil {
			a.errKinds = map[string]int64{}
		}
		if len(a.errKinds) < maxErrorKinds {
			a.errKinds[errText]++
		} else {
			a.errKinds["(other)"]++
		}
		return
	}
	if a.byStatus == nil {
		a.byStatus = map[int]int64{}
	}
	a.byStatus[int(code)]++
	if code >= 200 && code < 300 {
		a.ok++
	}
	a.latencies = append(a.latencies, lat)
}

const maxErrorKinds = 10

func (a *accumulator) counts() (requests, ok int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests, a.ok
}

func (a *accumulator) result(elapsed time.Duration) *Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &Result{Requests: a.requests, OK: a.ok, Errors: a.errors, ErrorKinds: a.errKinds,
		ByStatus: map[string]int64{}, DurationS: elapsed.Seconds()}
	for code, n := range a.byStatus {
		r.ByStatus[strconv.Itoa(code)] = n
	}
	if elapsed > 0 {
		r.Throughput = float64(a.ok) / elapsed.Seconds()
	}
	r.Latency = percentiles(a.latencies)
	return r
}

// percentiles by the nearest-rank method over every sample; exact, and the runs are bounded.
func percentiles(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return ms(s[max(i, 0)])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), P999: rank(0.999), Max: ms(s[len(s)-1]),
		Mean: ms(sum / time.Duration(len(s)))}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 } // milliseconds, µs precision
