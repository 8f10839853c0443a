package roundtrip

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/publishers"
)

// Metrics are the echo's and the correlator's series; the only label is the broker, so their number is
// fixed by the registry whatever ids and topics pass through.
type Metrics struct {
	roundTrip  *prometheus.HistogramVec // send time in the payload → ack received, one clock
	oneWay     *prometheus.HistogramVec // send time in the payload → echo received it (echo in-process: one clock)
	echoed     *prometheus.CounterVec
	echoFailed *prometheus.CounterVec
	lost       *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	outOfOrder *prometheus.CounterVec
}

// NewMetrics registers the round-trip series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: publishers.LatencyBuckets,
			NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160, NativeHistogramMinResetDuration: time.Hour,
		}, []string{"broker"})
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"broker"})
	}
	m := &Metrics{
		roundTrip:  hist("mqtarget_roundtrip_seconds", "Round trip of a message: its send time to the arrival of its ack from the echo."),
		oneWay:     hist("mqtarget_echo_latency_seconds", "One-way end-to-end latency: a message's send time (payload) to the echo's receipt; one clock when the echo runs in the sending process."),
		echoed:     counter("mqtarget_echo_messages_total", "Messages the echo published back as acks."),
		echoFailed: counter("mqtarget_echo_failures_total", "Messages the echo could not publish back (publish error or shutdown)."),
		lost:       counter("mqtarget_roundtrip_lost_total", "Round trips whose ack did not come back before the timeout."),
		duplicates: counter("mqtarget_roundtrip_duplicates_total", "Acks for an id already acknowledged."),
		outOfOrder: counter("mqtarget_roundtrip_out_of_order_total", "Acks arriving after an ack of a later id of the same producer run."),
	}
	reg.MustRegister(m.roundTrip, m.oneWay, m.echoed, m.echoFailed, m.lost, m.duplicates, m.outOfOrder)
	return m
}
