package publishers

import (
	"context"
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
	// results are the "result" label values, "ok" first (resultIndex relies on it).
	results = [...]string{"ok", "timeout", "rejected", "unavailable", "canceled", "error"}
)

// LatencyBuckets are the classic histogram buckets for request and publish latencies: 25µs to ~13s,
// fine enough to tell 200µs from 300µs. Native histograms are exported alongside them.
var LatencyBuckets = prometheus.ExponentialBucketsRange(25e-6, 13, 30)

// Metrics holds the publish metrics shared by every instrumented publisher.
type Metrics struct {
	duration *prometheus.HistogramVec
	messages *prometheus.CounterVec
}

// NewMetrics registers the publish metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
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
			Help: "Messages published, by outcome (ok, timeout, rejected, unavailable, canceled, error).",
		}, []string{"broker", "host", "mode", "result"}),
	}
	reg.MustRegister(m.duration, m.messages)
	return m
}

// Instrument wraps p so every publish is timed and its outcome counted under broker and host labels.
func (m *Metrics) Instrument(broker string, p Publisher) Publisher {
	hosts := p.Hosts()
	ip := &instrumented{Publisher: p, obs: make([][]modeObs, len(hosts))}
	// Resolve every label combination once so the hot path does no label lookups.
	for h, addr := range hosts {
		ip.obs[h] = make([]modeObs, len(modes))
		for i, mode := range modes {
			mo := modeObs{duration: m.duration.WithLabelValues(broker, addr, mode)}
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
}

func (o *modeObs) observe(start time.Time, n int, err error) {
	o.duration.Observe(time.Since(start).Seconds())
	o.results[resultIndex(err)].Add(float64(n))
}

// resultIndex is the index of Result(err) in results; an array index instead of a map lookup keeps
// the decorator cheap on the hot path, where err is nil.
func resultIndex(err error) int {
	if err == nil {
		return 0
	}
	r := Result(err)
	for i, name := range results {
		if name == r {
			return i
		}
	}
	return len(results) - 1 // "error"; Result returns nothing else
}

type instrumented struct {
	Publisher
	obs [][]modeObs // [host][mode index]
}

// at returns the observers for host and mode, or nil for an out-of-range host (the publisher reports that error).
func (p *instrumented) at(host, mode int) *modeObs {
	if host < 0 || host >= len(p.obs) {
		return nil
	}
	return &p.obs[host][mode]
}

func (p *instrumented) Publish(ctx context.Context, host int, topic string, body []byte) error {
	start := time.Now()
	err := p.Publisher.Publish(ctx, host, topic, body)
	if o := p.at(host, 0); o != nil {
		o.observe(start, 1, err)
	}
	return err
}

func (p *instrumented) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	start := time.Now()
	err := p.Publisher.PublishBatch(ctx, host, topic, bodies)
	if o := p.at(host, 1); o != nil {
		o.observe(start, len(bodies), err)
	}
	return err
}

func (p *instrumented) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	o := p.at(host, 2)
	if o == nil {
		return p.Publisher.PublishAsync(host, topic, body, done)
	}
	start := time.Now()
	err := p.Publisher.PublishAsync(host, topic, body, func(err error) {
		o.observe(start, 1, err)
		done(err)
	})
	if err != nil {
		o.observe(start, 1, err)
	}
	return err
}
