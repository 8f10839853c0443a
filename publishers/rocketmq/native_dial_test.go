package rocketmq

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestRMQNativeSlowDial: the shared check of a broker slow to set connections up. The native path's
// dial is the TCP and TLS handshakes alone, so the front delays its TLS handshake; one connection.
func TestRMQNativeSlowDial(t *testing.T) {
	f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte { return rmqTestResponse(0, q.opaque, "", false) })
	publishertest.RunSlowDial(t, publishertest.SlowDialCase{Backend: f.ln.Addr().String(), TLS: true, Topic: "t", MaxConns: 1,
		New: func(t *testing.T, addr string, tc *tls.Config) publishers.Publisher {
			p := newTestRMQNative(t, f, 5*time.Second, "t")
			p.admin.TLS = tc
			p.brokers[0].Addr = addr
			return p
		}})
}
