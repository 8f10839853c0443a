package publishers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Publish modes, used as the "mode" label.
const (
	ModeSync  = "sync"
	ModeBatch = "batch"
	ModeAsync = "async"
)

var (
	modes = []string{ModeSync, ModeBatch, ModeAsync}
	// results are the "result" label values, "ok" first (resultIndex relies on it): the error kinds,
	// never error text, so the label stays bounded.
	results = [...]string{"ok", "timeout", "rejected", "unavailable", "closed", "canceled", "error"}
)

// FailureLogInterval is how often a failure is logged at most per broker, host and result; the ones in
// between are counted and the count is logged with the next one.
const FailureLogInterval = 10 * time.Second

// LatencyBuckets are the classic histogram buckets for request and publish latencies: 25µs to ~13s,
// fine enough to tell 200µs from 300µs. Native histograms are exported alongside them.
var LatencyBuckets = prometheus.ExponentialBucketsRange(25e-6, 13, 30)

// Metrics holds the publish metrics shared by every instrumented publisher.
type Metrics struct {
	duration *prometheus.HistogramVec
	messages *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	conns    *connCollector
	log      *slog.Logger // failed publishes, rate-limited; nil: not logged
	logEvery time.Duration
}

// NewMetrics registers the publish metrics on reg; failed publishes are logged on log (nil: not logged),
// at most once per FailureLogInterval per broker, host and result.
func NewMetrics(reg prometheus.Registerer, log *slog.Logger) *Metrics {
	m := &Metrics{
		log:      log,
		logEvery: FailureLogInterval,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "mqtarget_publish_duration_seconds",
			Help:                            "Time from handing messages to the broker client until the broker acknowledged them (or the publish failed), per publish call.",
			Buckets:                         LatencyBuckets,
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"broker", "host", "mode"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqtarget_publish_messages_total",
			Help: "Messages published, by outcome (ok, timeout, rejected, unavailable, closed, canceled, error).",
		}, []string{"broker", "host", "mode", "result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqtarget_publish_bytes_total",
			Help: "Payload bytes the broker acknowledged (result ok), all modes together.",
		}, []string{"broker", "host"}),
		conns: newConnCollector(),
	}
	reg.MustRegister(m.duration, m.messages, m.bytes, m.conns)
	return m
}

// Instrument wraps p so every publish is timed and its outcome counted under broker and host labels;
// a p that counts its connections (ConnCounter) or protocol errors (ProtocolErrorCounter) has them exported too.
func (m *Metrics) Instrument(broker string, p Publisher) Publisher {
	hosts := p.Hosts()
	m.conns.add(broker, hosts, p)
	ip := &instrumented{Publisher: p, obs: make([][]modeObs, len(hosts)), epoch: time.Now()}
	// Resolve every label combination once so the hot path does no label lookups.
	for h, addr := range hosts {
		ip.obs[h] = make([]modeObs, len(modes))
		var fails *hostFailures
		if m.log != nil {
			fails = &hostFailures{log: m.log.With("broker", broker, "host", addr), every: &m.logEvery, epoch: ip.epoch}
		}
		okBytes := m.bytes.WithLabelValues(broker, addr)
		for i, mode := range modes {
			mo := modeObs{duration: m.duration.WithLabelValues(broker, addr, mode), bytes: okBytes, mode: mode, fails: fails}
			for ri, r := range results {
				mo.results[ri] = m.messages.WithLabelValues(broker, addr, mode, r)
			}
			ip.obs[h][i] = mo
		}
	}
	return ip
}

type modeObs struct {
	duration prometheus.Observer
	results  [len(results)]prometheus.Counter // indexed like results
	bytes    prometheus.Counter               // the host's, shared by its modes
	mode     string
	fails    *hostFailures // shared by the host's modes; nil: failures are not logged
}

func (o *modeObs) observe(took time.Duration, n, size int, err error) {
	o.duration.Observe(took.Seconds())
	ri := resultIndex(err)
	o.results[ri].Add(float64(n))
	if ri == 0 {
		o.bytes.Add(float64(size))
	}
	if ri != 0 && o.fails != nil {
		o.fails.record(ri, o.mode, n, err)
	}
}

// hostFailures logs one host's failed publishes: the first of each result at once, then at most one
// per FailureLogInterval with the number left unlogged in between, so an outage cannot flood the log
// and a single odd failure (an async publish no client waits for) still leaves a trace.
type hostFailures struct {
	log   *slog.Logger
	every *time.Duration // the Metrics' logEvery
	epoch time.Time
	mu    sync.Mutex
	last  [len(results)]time.Duration // since epoch, of the last logged failure; 0: none yet
	held  [len(results)]int64         // failed messages not logged since
}

func (f *hostFailures) record(ri int, mode string, n int, err error) {
	now := time.Since(f.epoch) + 1 // +1: never 0, which means "none yet"
	f.mu.Lock()
	if f.last[ri] != 0 && now-f.last[ri] < *f.every {
		f.held[ri] += int64(n)
		f.mu.Unlock()
		return
	}
	held := f.held[ri]
	f.last[ri], f.held[ri] = now, 0
	f.mu.Unlock()
	f.log.Warn("publish failed", "result", results[ri], "mode", mode, "messages", n, "err", err,
		"unlogged_since_last", held)
}

// resultIndex is the index of err's result in results; an array index instead of a map lookup keeps
// the decorator cheap on the hot path, where err is nil.
func resultIndex(err error) int {
	if err == nil {
		return 0
	}
	r := Result(err)
	if r == "unavailable" && errors.Is(err, ErrClosed) {
		r = "closed" // our own shutdown, not the broker's failure
	}
	for i, name := range results {
		if name == r {
			return i
		}
	}
	return len(results) - 1 // "error"; Result returns nothing else
}

type instrumented struct {
	Publisher
	obs   [][]modeObs // [host][mode index]
	epoch time.Time
}

// now is the monotonic time since the publisher was instrumented. time.Since on a time with a
// monotonic reading reads only the monotonic clock, where time.Now reads the wall clock too; clock
// reads are not free on every machine (300-600 ns each on the VM of docs/benchmarks.md).
func (p *instrumented) now() time.Duration { return time.Since(p.epoch) }

// at returns the observers for host and mode, or nil for an out-of-range host (the publisher reports that error).
func (p *instrumented) at(host, mode int) *modeObs {
	if host < 0 || host >= len(p.obs) {
		return nil
	}
	return &p.obs[host][mode]
}

func (p *instrumented) Publish(ctx context.Context, host int, topic string, body []byte) error {
	start := p.now()
	err := p.Publisher.Publish(ctx, host, topic, body)
	if o := p.at(host, 0); o != nil {
		o.observe(p.now()-start, 1, len(body), err)
	}
	return err
}

func (p *instrumented) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	start := p.now()
	err := p.Publisher.PublishBatch(ctx, host, topic, bodies)
	if o := p.at(host, 1); o != nil {
		size := 0
		for _, b := range bodies {
			size += len(b)
		}
		o.observe(p.now()-start, len(bodies), size, err)
	}
	return err
}

func (p *instrumented) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	o := p.at(host, 2)
	if o == nil {
		return p.Publisher.PublishAsync(host, topic, body, done)
	}
	start := p.now()
	err := p.Publisher.PublishAsync(host, topic, body, func(err error) {
		o.observe(p.now()-start, 1, len(body), err)
		done(err)
	})
	if err != nil {
		o.observe(p.now()-start, 1, len(body), err)
	}
	return err
}
