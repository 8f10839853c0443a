package publishers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnCounts are one host's connection set-ups since the publisher started.
type ConnCounts struct {
	Opened       uint64 // connections made (handshake done), the first ones and reconnects
	Reopened     uint64 // of Opened, those that replaced a connection that broke
	DialFailures uint64 // dials or handshakes that failed
}

// ConnCounter is implemented by the publishers that make their own broker connections (through the
// pool or their own); a client library that keeps its connections to itself has no counts.
type ConnCounter interface {
	ConnCounts(host int) ConnCounts
}

// connCollector exports, per broker host, the ConnCounts and the protocol errors
// (ProtocolErrorCounter) of the instrumented publishers that have them. The publishers count anyway
// (atomics at connection set-up and on a connection's failure path, never on the publish path); this
// reads them at scrape time.
type connCollector struct {
	opened, reopened, failed, protocol *prometheus.Desc

	mu   sync.Mutex
	pubs []connSource
}

type connSource struct {
	broker string
	hosts  []string
	conns  ConnCounter          // nil: not counted
	proto  ProtocolErrorCounter // nil: not counted
}

func newConnCollector() *connCollector {
	labels := []string{"broker", "host"}
	return &connCollector{
		opened: prometheus.NewDesc("mqtarget_broker_connections_total",
			"Broker connections the publisher made (handshake done), first connections and reconnects.", labels, nil),
		reopened: prometheus.NewDesc("mqtarget_broker_reconnects_total",
			"Broker connections the publisher made to replace one that broke.", labels, nil),
		failed: prometheus.NewDesc("mqtarget_broker_dial_failures_total",
			"Broker connections the publisher tried to make and could not (dial or handshake failed).", labels, nil),
		protocol: prometheus.NewDesc("mqtarget_protocol_errors_total",
			"Broker protocol violations (malformed or unexpected frames, answers to nothing outstanding or to commands not yet written); "+
				"each closed its connection and failed what was pending on it as unavailable.", labels, nil),
	}
}

// add exports p's counts when it has them.
func (c *connCollector) add(broker string, hosts []string, p Publisher) {
	s := connSource{broker: broker, hosts: hosts}
	s.conns, _ = p.(ConnCounter)
	s.proto, _ = p.(ProtocolErrorCounter)
	if s.conns == nil && s.proto == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pubs = append(c.pubs, s)
}

func (c *connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.opened
	ch <- c.reopened
	ch <- c.failed
	ch <- c.protocol
}

func (c *connCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	pubs := c.pubs
	c.mu.Unlock()
	emit := func(d *prometheus.Desc, v uint64, p connSource, addr string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), p.broker, addr)
	}
	for _, p := range pubs {
		for h, addr := range p.hosts {
			if p.conns != nil {
				n := p.conns.ConnCounts(h)
				emit(c.opened, n.Opened, p, addr)
				emit(c.reopened, n.Reopened, p, addr)
				emit(c.failed, n.DialFailures, p, addr)
			}
			if p.proto != nil {
				emit(c.protocol, p.proto.ProtocolErrors(h), p, addr)
			}
		}
	}
}
