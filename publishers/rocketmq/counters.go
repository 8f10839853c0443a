package rocketmq

import "github.com/mqtarget/mqtarget/publishers"

// BrokerVersion implements publishers.BrokerVersioner; Ping (at start, and /readyz) learns it.
func (p *Publisher) BrokerVersion(host int) string {
	if host < 0 || host >= len(p.brokers) {
		return ""
	}
	return p.versions.Get(p.brokers[host].Addr)
}

// ConnCounts implements publishers.ConnCounter: the native send path's connections per broker; none
// with the client library.
func (p *Publisher) ConnCounts(host int) publishers.ConnCounts {
	if p.native == nil || host < 0 || host >= len(p.native.conns) {
		return publishers.ConnCounts{}
	}
	return p.native.conns[host].counts.Get()
}

// CountsConnections implements publishers.ConnCounting: only the native send path counts.
func (p *Publisher) CountsConnections() bool { return p.native != nil }

// ProtocolErrors implements publishers.ProtocolErrorCounter: the native send path's; none with the
// client library.
func (p *Publisher) ProtocolErrors(host int) uint64 {
	if p.native == nil {
		return 0
	}
	return p.native.proto.Get(host)
}
