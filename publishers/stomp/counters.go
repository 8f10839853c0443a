package stomp

import "github.com/mqtarget/mqtarget/publishers"

// BrokerVersion implements publishers.BrokerVersioner: the server header of its CONNECTED frame.
func (p *Publisher) BrokerVersion(host int) string {
	if p.pool.CheckHost(host) != nil {
		return ""
	}
	return p.versions.Get(p.pool.Addrs[host])
}

// ConnCounts implements publishers.ConnCounter.
func (p *Publisher) ConnCounts(host int) publishers.ConnCounts { return p.pool.ConnCounts(host) }

// ProtocolErrors implements publishers.ProtocolErrorCounter.
func (p *Publisher) ProtocolErrors(host int) uint64 { return p.proto.Get(host) }
