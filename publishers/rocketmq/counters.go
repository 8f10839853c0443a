package rocketmq

import "github.com/mqtarget/mqtarget/publishers"

// BrokerVersion implements publishers.BrokerVersioner; Ping (at start, and /readyz) learns it.
func (p *Publisher) BrokerVersion(host int) string {
	if host < 0 || host >= len(p.brokers) {
		return ""
	}
	return p.versions.Get(p.brokers[host].Addr)
}

// ConnCounts implements publishers.ConnCounter: the native connections per broker. The library path
// (Publisher) has none: rocketmq-client-go keeps its connections to itself.
func (p *Native) ConnCounts(host int) publishers.ConnCounts {
	if host < 0 || host >= len(p.native.conns) {
		return publishers.ConnCounts{}
	}
	return p.native.conns[host].counts.Get()
}

// ProtocolErrors implements publishers.ProtocolErrorCounter; the library path counts none
// (rocketmq-client-go reads its answers itself).
func (p *Native) ProtocolErrors(host int) uint64 { return p.native.proto.Get(host) }
