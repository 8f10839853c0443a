package publishers

import "sync"

// BrokerVersioner is implemented by the publishers that learn what their brokers run, from a handshake
// answer or the broker's runtime information (e.g. "ActiveMQ-Artemis/2.40.0 ActiveMQ Artemis Messaging
// Engine").
type BrokerVersioner interface {
	// BrokerVersion is what host's broker said it runs; "" until a connection to it told.
	BrokerVersion(host int) string
}

// Versions remembers, per broker address, what the broker said it runs.
type Versions struct{ m sync.Map } // addr -> string

// Set records what addr's broker said it runs (nothing when it said nothing).
func (v *Versions) Set(addr, version string) {
	if version != "" {
		v.m.Store(addr, version)
	}
}

// Get is what addr's broker said it runs; "" until it told.
func (v *Versions) Get(addr string) string {
	s, _ := v.m.Load(addr)
	version, _ := s.(string)
	return version
}

// BrokerVersion passes the wrapped publisher's on ("" when it has none).
func (ip *instrumented) BrokerVersion(host int) string {
	if v, ok := ip.Publisher.(BrokerVersioner); ok {
		return v.BrokerVersion(host)
	}
	return ""
}
