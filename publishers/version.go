package publishers

import "sync"

// BrokerVersioner is implemented by the publishers that learn what their brokers run: nsqd's IDENTIFY
// answer (its version), a STOMP broker's CONNECTED frame (its server header, e.g.
// "ActiveMQ-Artemis/2.40.0 ActiveMQ Artemis Messaging Engine"), a RocketMQ broker's runtime information
// (Ping asks for it: "RocketMQ V5_3_3").
type BrokerVersioner interface {
	// BrokerVersion is what host's broker said it runs; "" until a connection to it told.
	BrokerVersion(host int) string
}

// brokerVersions remembers, per broker address, what the broker said it runs.
type brokerVersions struct{ m sync.Map } // addr -> string

func (v *brokerVersions) set(addr, version string) {
	if version != "" {
		v.m.Store(addr, version)
	}
}

func (v *brokerVersions) get(addr string) string {
	s, _ := v.m.Load(addr)
	version, _ := s.(string)
	return version
}

// BrokerVersion implements BrokerVersioner.
func (p *NSQ) BrokerVersion(host int) string {
	if p.pool.checkHost(host) != nil {
		return ""
	}
	return p.versions.get(p.pool.hosts[host])
}

// BrokerVersion implements BrokerVersioner.
func (p *STOMP) BrokerVersion(host int) string {
	if p.pool.checkHost(host) != nil {
		return ""
	}
	return p.versions.get(p.pool.hosts[host])
}

// BrokerVersion implements BrokerVersioner; Ping (at start, and /readyz) learns it.
func (p *RocketMQ) BrokerVersion(host int) string {
	if host < 0 || host >= len(p.brokers) {
		return ""
	}
	return p.versions.get(p.brokers[host].Addr)
}

// BrokerVersion passes the wrapped publisher's on ("" when it has none).
func (ip *instrumented) BrokerVersion(host int) string {
	if v, ok := ip.Publisher.(BrokerVersioner); ok {
		return v.BrokerVersion(host)
	}
	return ""
}
