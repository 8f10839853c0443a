// Package load drives an HTTP endpoint in one of two models and summarises what came back: closed
// (C connections, each sending its next request when the previous answer arrived, like wrk) and open
// (R requests per second whatever the answers do, like wrk2). Open-model latency is measured from the
// request's intended send time, so a stall of the target shows in the percentiles instead of hiding
// behind the requests it delayed (coordinated omission); beside it the service time (from the actual
// send, what wrk, hey and vegeta show) and the lag (intended → actual: the generator's own lateness).
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	MaxTimeout     = 10 * time.Minute
	MaxBodyBytes   = 64 << 20 // the largest message.max_size a mqtarget accepts
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

// Validate reports the first bad option, naming it as the load subcommand's flag.
func (o Options) Validate() error {
	if _, err := ValidateURL(o.URL); err != nil {
		return fmt.Errorf("URL: %w", err)
	}
	switch {
	case o.Rate < 0 || o.Rate > MaxRate:
		return fmt.Errorf("-rate: must be 1..%d, got %d", MaxRate, o.Rate)
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
	case o.Timeout < 0 || o.Timeout > MaxTimeout:
		return fmt.Errorf("-timeout: must be > 0 and <= %v, got %v", MaxTimeout, o.Timeout)
	case len(o.Body) > MaxBodyBytes:
		return fmt.Errorf("-body: at most %d bytes, got %d", MaxBodyBytes, len(o.Body))
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

// Run sends the load for o.Duration (or until ctx ends) and summarises it. Requests in flight when the
// duration or ctx ends are answered (or time out) and counted.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	workers := o.Connections
	if o.Rate > 0 {
		workers = o.MaxWorkers
		if workers == 0 {
			workers = DefaultMaxWorkers
		}
	}
	// Its own client: no proxy, no redirects, and its idle connections closed when the run ends, so a
	// long sweep does not pile them up. The closed model's C workers have C connections at most.
	client := NewClient(timeout, o.Connections)
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = workers
	defer client.CloseIdleConnections()
	s := &sender{client: client, method: o.method(), url: o.URL, body: o.Body, rec: &recorder{}}

	// One goroutine, waited for below, reports progress.
	start := time.Now()
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
					o.Progress(Progress{Elapsed: now.Sub(start), Duration: o.Duration, Requests: req, OK: ok})
				}
			}
		})
	}
	var notSent int64
	if o.Rate > 0 {
		notSent = s.open(ctx, start, int64(o.Rate), o.Duration, workers)
	} else {
		s.closed(ctx, start.Add(o.Duration), workers)
	}
	end := time.Now()
	close(done)
	wg.Wait()

	r := s.rec.result(end.Sub(start), o.Rate > 0)
	r.Meta = Meta{
		Version: o.Version, Cores: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0),
		Model: o.Model(), Rate: o.Rate, Connections: o.Connections, MaxWorkers: o.MaxWorkers,
		Duration: o.Duration.String(), Timeout: timeout.String(), Method: o.method(), BodyBytes: len(o.Body),
		Start: start.UTC(), End: end.UTC(), Target: o.Target,
	}
	r.Meta.setEndpoint(o.URL)
	if ctx.Err() != nil {
		r.Meta.Interrupted = true
	} else {
		r.NotSent = notSent
	}
	return r, nil
}

// sender sends the requests of one run and records what came back.
type sender struct {
	client *http.Client
	method string
	url    string
	body   []byte
	rec    *recorder
}

// closed is the closed model: each of the workers sends its next request when its answer is in, until
// the deadline or ctx ends.
func (s *sender) closed(ctx context.Context, deadline time.Time, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				sent := time.Now()
				if !sent.Before(deadline) {
					return
				}
				s.send(sent, sent)
			}
		})
	}
	wg.Wait()
}

// open is the open model: request k is due at start + k/rate, and sent then by a goroutine of its own,
// of at most workers at a time; a request that waits for a worker is late, and its latency counts from
// when it was due. It returns the requests due within the duration that were never sent: lateGrace
// after the end the workers were still all busy, or the pacer still behind (or ctx ended).
func (s *sender) open(ctx context.Context, start time.Time, rate int64, duration time.Duration, workers int) (notSent int64) {
	n := dueCount(duration, rate)
	var wg sync.WaitGroup
	slots := make(chan struct{}, workers)
	stop := time.NewTimer(duration + lateGrace)
	defer stop.Stop()
	paced := make(chan int64)
	// The pacer runs on a goroutine of its own, locked to its thread (see pacer).
	go func() {
		p := newPacer()
		k := int64(0)
		defer func() { paced <- k }()
		for ; k < n; k++ {
			due := start.Add(dueOffset(k, rate))
			if !p.wait(ctx, due) {
				return
			}
			select {
			case <-stop.C: // a generator without the CPU to catch up: what is left is not sent
				return
			case slots <- struct{}{}:
			default: // every worker busy: wait for one, but not past the end
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				case <-stop.C:
					return
				}
			}
			wg.Go(func() {
				defer func() { <-slots }()
				s.send(due, time.Now())
			})
		}
	}()
	sent := <-paced
	wg.Wait()
	return n - sent
}

// send sends one request; due is when it was meant to go, sent when it went.
func (s *sender) send(due, sent time.Time) {
	var body io.Reader
	if s.body != nil {
		body = bytes.NewReader(s.body)
	}
	req, err := http.NewRequest(s.method, s.url, body)
	if err != nil {
		s.rec.add(0, err.Error(), "", due, sent, time.Now())
		return
	}
	req.Header.Set("User-Agent", "mqtarget-load")
	resp, err := s.client.Do(req)
	if err != nil {
		s.rec.add(0, errorKind(err), "", due, sent, time.Now())
		return
	}
	var sample string
	if !ok2xx(resp.StatusCode) && s.rec.wantSample(resp.StatusCode) {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, sampleBytes+1))
		if sample = oneLine(string(b)); sample == "" {
			sample = "(empty)"
		}
	}
	_, err = io.Copy(io.Discard, resp.Body) // the whole answer is part of its latency, and frees the connection
	_ = resp.Body.Close()
	end := time.Now()
	if err != nil {
		s.rec.add(0, "reading the answer: "+errorKind(err), "", due, sent, end)
		return
	}
	s.rec.add(resp.StatusCode, "", sample, due, sent, end)
}

func ok2xx(code int) bool { return code >= 200 && code < 300 }

// errorKind is a transport error without the method and URL every one of them repeats, on one short
// line: Go's errors quote what a target sent (a malformed status line can be 1 MB long).
func errorKind(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
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
	if open {
		service, lag := a.service.latency(), a.lag.latency()
		r.Service, r.Lag = &service, &lag
	}
	return r
}
