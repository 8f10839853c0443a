package amqp

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestTLS: amqps:// with the shared tls_* settings: verified against the configured CA and name, and
// refused (unavailable, within dial_timeout) otherwise.
func TestTLS(t *testing.T) {
	cert, ca := publishertest.SelfSigned(t)
	tlsFake := newFakeTLS(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, acker)
	plainFake := newFake(t, acker)
	amqps := func(f *fakeBroker) string { return strings.Replace(f.url(), "amqp://", "amqps://", 1) }
	for _, tc := range []struct {
		name string
		url  string
		tls  publishers.TLSConfig
		ok   bool
	}{
		{"verified by the CA file", amqps(tlsFake), publishers.TLSConfig{Enabled: true, CAFile: ca}, true},
		{"server name configured", amqps(tlsFake), publishers.TLSConfig{Enabled: true, CAFile: ca, ServerName: "broker.test"}, true},
		{"unknown CA (system roots)", amqps(tlsFake), publishers.TLSConfig{Enabled: true}, false},
		{"name mismatch", amqps(tlsFake), publishers.TLSConfig{Enabled: true, CAFile: ca, ServerName: "other.test"}, false},
		{"insecure skip verify", amqps(tlsFake), publishers.TLSConfig{Enabled: true, InsecureSkipVerify: true}, true},
		{"plain-text server", amqps(plainFake), publishers.TLSConfig{Enabled: true, CAFile: ca}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestPublisher(t, []string{tc.url}, func(c *Config) { c.TLSConfig = tc.tls })
			// A refused handshake ends the publish, not the caller's deadline: the bound sits well below
			// that deadline and above dial_timeout (a busy CI run took 2.5 s with the system roots).
			start := time.Now()
			err := p.Publish(ctxT(t, 10*time.Second), 0, "t", []byte("x"))
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Publish: %v", err)
			case !tc.ok && !errors.Is(err, publishers.ErrUnavailable):
				t.Fatalf("Publish: %v, want ErrUnavailable", err)
			case time.Since(start) > 5*time.Second:
				t.Fatalf("took %v: it waited for the caller's deadline, not dial_timeout (1s)", time.Since(start))
			}
		})
	}
}
