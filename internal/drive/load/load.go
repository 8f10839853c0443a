// Package load drives an HTTP endpoint in one of two models and summarises what came back: closed
// (C connections, each sending its next request when the previous answer arrived, like wrk) and open
// (R requests per second whatever the answers do, like wrk2). Open-model latency is measured from the
// request's intended send time, so a stall of the target shows in the percentiles instead of hiding
// behind the requests it delayed (coordinated omission); beside it the service time (from the actual
// send, what wrk, hey and vegeta show) and the lag (intended → actual: the generator's own lateness).
package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	// RateTo, when > 0, ramps the open model's rate linearly from Rate to RateTo over Duration.
	RateTo int
	// Shard and Shards: this run is shard Shard (from 0) of Shards > 1 runs of one load on several
	// processes or machines. In the open model it sends request k of the whole schedule when k mod
	// Shards = Shard (together they offer Rate, interleaved exactly); in the closed model its share of
	// the Connections. Shards 0: the whole load.
	Shard, Shards int
	// StartAt, when set, is when the run begins (the schedule's time zero), so shards start together.
	StartAt time.Time
	// Warmup is sent before Duration (at Rate in the open model) and counted apart, in Result.Warmup.
	Warmup time.Duration
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
	// DefaultMaxErrorRate is the share of requests (non-2xx answers and transport errors) above which a
	// run failed (Result.Check).
	DefaultMaxErrorRate = 0.01
)

// Bounds of one run: every number that drives the generator's memory or time. Latencies go into
// histograms of bounded size, so the number of requests is not bounded by memory.
const (
	MaxRate        = 1_000_000
	MaxConnections = 10_000
	MaxWorkers     = 100_000
	MaxDuration    = 24 * time.Hour
	MaxShards      = 1000
	// startLate: a run whose StartAt passed longer ago than this does not start (its shards would not
	// start together, and the open model would owe the whole past at once).
	startLate    = time.Second
	MaxTimeout   = 10 * time.Minute
	MaxBodyBytes = 64 << 20 // the largest message.max_size a mqtarget accepts
	// lateGrace: after the duration, the open model still sends requests that were due within it for
	// this long (a generator a little behind at the end); what is left then is not_sent.
	lateGrace = time.Second
	// sampleBytes of at most samplesPerStatus distinct bodies per non-2xx status (of at most
	// maxSampledStatuses statuses) are kept, to show what the target said.
	sampleBytes        = 256
	samplesPerStatus   = 3
	maxSampledStatuses = 20
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

// ParseRate reads a rate as -rate and a sweep's axes.rates write it: R, or R:R2 for a linear ramp from
// R to R2 (to is 0 without a ramp). Bounds are Validate's.
func ParseRate(s string) (from, to int, err error) {
	a, b, ramp := strings.Cut(s, ":")
	if from, err = strconv.Atoi(a); err != nil {
		return 0, 0, fmt.Errorf("want R or R:R2 (whole requests per second), got %q", s)
	}
	if ramp {
		if to, err = strconv.Atoi(b); err != nil || to < 1 {
			return 0, 0, fmt.Errorf("want R or R:R2 (whole requests per second), got %q", s)
		}
	}
	return from, to, nil
}

// Validate reports the first bad option, naming it as the load subcommand's flag.
func (o Options) Validate() error {
	if _, err := ValidateURL(o.URL); err != nil {
		return fmt.Errorf("URL: %w", err)
	}
	switch {
	case o.Rate < 0 || o.Rate > MaxRate:
		return fmt.Errorf("-rate: must be 1..%d, got %d", MaxRate, o.Rate)
	case o.RateTo < 0 || o.RateTo > MaxRate:
		return fmt.Errorf("-rate: the ramp's end must be 1..%d, got %d", MaxRate, o.RateTo)
	case o.RateTo > 0 && o.Rate == 0:
		return errors.New("-rate: a ramp is for the open model")
	case o.Connections < 0 || o.Connections > MaxConnections:
		return fmt.Errorf("-connections: must be 1..%d, got %d", MaxConnections, o.Connections)
	case o.Rate > 0 && o.Connections > 0:
		return errors.New("-rate and -connections: give one (open or closed model), not both")
	case o.Rate == 0 && o.Connections == 0:
		return errors.New("-rate or -connections: one is required (open or closed model)")
	case o.MaxWorkers < 0 || o.MaxWorkers > MaxWorkers:
		return fmt.Errorf("-max-workers: must be 0..%d, got %d", MaxWorkers, o.MaxWorkers)
	case o.Duration <= 0 || o.Duration > MaxDuration:
		return fmt.Errorf("-duration: must be > 0 and <= %v, got %v", MaxDuration, o.Duration)
	case o.Warmup < 0 || o.Warmup > MaxDuration:
		return fmt.Errorf("-warmup: must be 0..%v, got %v", MaxDuration, o.Warmup)
	case o.Timeout < 0 || o.Timeout > MaxTimeout:
		return fmt.Errorf("-timeout: must be > 0 and <= %v, got %v", MaxTimeout, o.Timeout)
	case len(o.Body) > MaxBodyBytes:
		return fmt.Errorf("-body: at most %d bytes, got %d", MaxBodyBytes, len(o.Body))
	case o.Shards < 0 || o.Shards > MaxShards || o.Shards > 0 && (o.Shard < 0 || o.Shard >= o.Shards) || o.Shards == 0 && o.Shard != 0:
		return fmt.Errorf("-shard: must be I/N with 0 <= I < N <= %d, got %d/%d", MaxShards, o.Shard, o.Shards)
	case o.Shards > o.Connections && o.Connections > 0:
		return fmt.Errorf("-shard: %d shards need at least %d connections, got %d", o.Shards, o.Shards, o.Connections)
	case !o.StartAt.IsZero() && time.Until(o.StartAt) > MaxDuration:
		return fmt.Errorf("-start-at: at most %v ahead, got %s", MaxDuration, o.StartAt.Format(time.RFC3339))
	case !o.StartAt.IsZero() && time.Since(o.StartAt) > startLate:
		return fmt.Errorf("-start-at: %s passed %v ago", o.StartAt.Format(time.RFC3339Nano), time.Since(o.StartAt).Round(time.Millisecond))
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

// NewClient is an HTTP client that sends only where a request's URL says: no proxy from the environment
// (HTTP_PROXY would take the requests elsewhere and add its own latency) and no redirect followed (a 3xx
// is an answer, counted by its status). conns bounds its connections (0: no bound). Close its idle
// connections (CloseIdleConnections) when done.
func NewClient(timeout time.Duration, conns int) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{Proxy: nil, DialContext: dialer.DialContext, MaxIdleConnsPerHost: max(conns, 2),
		MaxConnsPerHost: conns, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	return &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Run sends the load for o.Warmup + o.Duration (or until ctx ends) and summarises it. Requests in
// flight when the duration or ctx ends are answered (or time out) and counted.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	// Its own client (conn.go): it sends to the URL's host only (no proxy, no redirect followed), and
	// every connection is closed when its worker ends, so a long sweep does not pile them up.
	u, _ := ValidateURL(o.URL)
	s := &sender{wire: newWire(u, o.method(), o.Body, timeout), rec: &recorder{}, warm: &recorder{}}
	shard, shards := o.Shard, max(o.Shards, 1)

	start := time.Now()
	if !o.StartAt.IsZero() {
		t := time.NewTimer(time.Until(o.StartAt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		start = o.StartAt
	}
	measured := start.Add(o.Warmup) // the end of the warm-up
	// One goroutine, waited for below, reports progress.
	var wg sync.WaitGroup
	done := make(chan struct{})
	if o.Progress != nil {
		wg.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case now := <-t.C:
					req, ok := s.rec.counts()
					wreq, wok := s.warm.counts()
					o.Progress(Progress{Elapsed: now.Sub(start), Duration: o.Warmup + o.Duration, Requests: req + wreq, OK: ok + wok})
				}
			}
		})
	}
	var notSent int64
	workers := o.Connections/shards + b2i(shard < o.Connections%shards)
	if o.Rate > 0 {
		workers = o.MaxWorkers
		if workers == 0 {
			workers = DefaultMaxWorkers
		}
		sc := newSchedule(int64(o.Rate), int64(o.RateTo), o.Warmup, o.Duration)
		notSent = s.open(ctx, start, sc, int64(shard), int64(shards), workers)
	} else {
		s.closed(ctx, measured, measured.Add(o.Duration), workers)
	}
	end := time.Now()
	close(done)
	wg.Wait()

	r := s.rec.result(end.Sub(measured), o.Rate > 0)
	if o.Warmup > 0 {
		w := s.warm.result(min(o.Warmup, end.Sub(start)), false)
		r.Warmup = &Phase{Requests: w.Requests, OK: w.OK, ByStatus: w.ByStatus, Errors: w.Errors, DurationS: w.DurationS,
			Latency: w.Latency, Histogram: w.Histograms.Latency}
	}
	r.Meta = Meta{
		Version: o.Version, Cores: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0),
		Model: o.Model(), Rate: o.Rate, RateTo: o.RateTo, Connections: o.Connections, MaxWorkers: o.MaxWorkers,
		Duration: o.Duration.String(), Timeout: timeout.String(), Method: o.method(), BodyBytes: len(o.Body),
		Start: measured.UTC(), End: end.UTC(), Target: o.Target,
	}
	if o.Warmup > 0 {
		r.Meta.Warmup = o.Warmup.String()
	}
	if o.Shards > 0 {
		r.Meta.Shard = fmt.Sprintf("%d/%d", o.Shard, o.Shards)
	}
	r.Meta.setEndpoint(o.URL)
	if ctx.Err() != nil {
		r.Meta.Interrupted = true
	} else {
		r.NotSent = notSent
	}
	return r, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sender sends the requests of one run and records what came back.
type sender struct {
	wire      *wire
	rec, warm *recorder // the measured part, the warm-up
}

// closed is the closed model: each of the workers, with a connection of its own, sends its next request
// when its answer is in, until the deadline or ctx ends; what it sends before measured is the warm-up's.
func (s *sender) closed(ctx context.Context, measured, deadline time.Time, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			c := &conn{}
			defer c.close()
			for ctx.Err() == nil {
				sent := time.Now()
				if !sent.Before(deadline) {
					return
				}
				rec := s.rec
				if sent.Before(measured) {
					rec = s.warm
				}
				s.send(c, rec, sent, sent)
			}
		})
	}
	wg.Wait()
}

// send sends one request on c and records it in rec; due is when it was meant to go, sent when it went.
func (s *sender) send(c *conn, rec *recorder, due, sent time.Time) {
	a := s.wire.do(c, rec.wantSample)
	rec.add(a.code, a.err, a.sample, due, sent, time.Now())
}

func ok2xx(code int) bool { return code >= 200 && code < 300 }

// errorKind is a transport error without the method and URL every one of them repeats, on one short
// line: Go's errors quote what a target sent (a malformed status line can be 1 MB long).
func errorKind(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		// Without the addresses: each connection's own port would make every error a kind of its own.
		return oneLine(oe.Op + ": " + oe.Err.Error())
	}
	return oneLine(err.Error())
}

// oneLine is s cut to sampleBytes as one line of valid UTF-8: control characters and newlines become
// spaces, so a hostile target cannot forge lines of the table.
func oneLine(s string) string {
	cut := len(s) > sampleBytes
	if cut {
		s = s[:sampleBytes] // a rune cut here becomes U+FFFD below
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s))
	if cut {
		s += " …"
	}
	return s
}

// recorder gathers results as they arrive; the progress goroutine reads its counts.
type recorder struct {
	mu       sync.Mutex
	requests atomic.Int64
	ok       atomic.Int64
	byStatus map[int]int64
	samples  map[int][]string
	errors   int64
	errKinds map[string]int64
	// Of every answered request (any status): from the due time, from the actual send, and the lag.
	latency, service, lag histogram
}

func (a *recorder) wantSample(code int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.samples[code]) < samplesPerStatus && (a.samples[code] != nil || len(a.samples) < maxSampledStatuses)
}

func (a *recorder) add(code int, errText, sample string, due, sent, end time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests.Add(1)
	if code == 0 { // no HTTP answer: a transport error (refused, reset, timeout)
		a.errors++
		if a.errKinds == nil {
			a.errKinds = map[string]int64{}
		}
		if _, ok := a.errKinds[errText]; ok || len(a.errKinds) < maxErrorKinds {
			a.errKinds[errText]++
		} else {
			a.errKinds["(other)"]++
		}
		return
	}
	if a.byStatus == nil {
		a.byStatus = map[int]int64{}
	}
	a.byStatus[code]++
	if ok2xx(code) {
		a.ok.Add(1)
	} else if ss := a.samples[code]; sample != "" && len(ss) < samplesPerStatus && !slices.Contains(ss, sample) &&
		(ss != nil || len(a.samples) < maxSampledStatuses) {
		if a.samples == nil {
			a.samples = map[int][]string{}
		}
		a.samples[code] = append(ss, sample)
	}
	if sent.Before(due) {
		sent = due // early is not possible, only clock rounding
	}
	a.latency.add(end.Sub(due))
	a.service.add(end.Sub(sent))
	a.lag.add(sent.Sub(due))
}

const maxErrorKinds = 10

func (a *recorder) counts() (requests, ok int64) { return a.requests.Load(), a.ok.Load() }

func (a *recorder) result(elapsed time.Duration, open bool) *Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &Result{Requests: a.requests.Load(), OK: a.ok.Load(), Errors: a.errors, ErrorKinds: a.errKinds,
		ByStatus: map[string]int64{}, DurationS: elapsed.Seconds()}
	for code, n := range a.byStatus {
		r.ByStatus[strconv.Itoa(code)] = n
	}
	for code, ss := range a.samples {
		if r.ErrorBodies == nil {
			r.ErrorBodies = map[string][]string{}
		}
		r.ErrorBodies[strconv.Itoa(code)] = ss
	}
	if elapsed > 0 {
		r.Throughput = float64(r.OK) / elapsed.Seconds()
	}
	r.Latency = a.latency.latency()
	r.Histograms.Latency = a.latency.export()
	if open {
		service, lag := a.service.latency(), a.lag.latency()
		r.Service, r.Lag = &service, &lag
		r.Histograms.Service, r.Histograms.Lag = a.service.export(), a.lag.export()
	}
	return r
}
