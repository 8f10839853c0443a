package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestTLS: MQTT over TLS from the first byte with the shared tls_* settings, at MQTT 5 and 3.1.1:
// verified against the configured CA and name, and refused (unavailable, within dial_timeout)
// otherwise, also by a broker speaking plain MQTT.
func TestTLS(t *testing.T) {
	cert, ca := publishertest.SelfSigned(t)
	for _, v := range []string{"5", version311} {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		tlsFake := newFakeOn(t, ln, behave, v)
		plainFake := newFakeV(t, behave, v)
		for _, tc := range []struct {
			name string
			addr string
			tls  publishers.TLSConfig
			ok   bool
		}{
			{"verified by the CA file", tlsFake.addr(), publishers.TLSConfig{Enabled: true, CAFile: ca}, true},
			{"server name from the setting", tlsFake.addr(), publishers.TLSConfig{Enabled: true, CAFile: ca, ServerName: "broker.test"}, true},
			{"wrong server name", tlsFake.addr(), publishers.TLSConfig{Enabled: true, CAFile: ca, ServerName: "other.test"}, false},
			{"unknown CA", tlsFake.addr(), publishers.TLSConfig{Enabled: true}, false},
			{"insecure skip verify", tlsFake.addr(), publishers.TLSConfig{Enabled: true, InsecureSkipVerify: true}, true},
			{"TLS to a plain broker", plainFake.addr(), publishers.TLSConfig{Enabled: true, CAFile: ca}, false},
		} {
			t.Run("v"+v+"/"+tc.name, func(t *testing.T) {
				c := DefaultConfig()
				c.Servers, c.Version, c.TLSConfig = []string{tc.addr}, v, tc.tls
				c.DialTimeout = 500 * time.Millisecond
				p, err := New(c, discard())
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = p.Close() }()
				// A refused handshake ends the publish, not the caller's deadline: the bound sits well
				// below that deadline and well above dial_timeout (a busy CI run took 1.05 s).
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				start := time.Now()
				err = p.Publish(ctx, 0, "t", []byte("m"))
				switch {
				case tc.ok && err != nil:
					t.Errorf("Publish: %v, want success", err)
				case !tc.ok && !errors.Is(err, publishers.ErrUnavailable):
					t.Errorf("Publish: %v, want ErrUnavailable", err)
				case time.Since(start) > 5*time.Second:
					t.Errorf("Publish took %v: it waited for the caller's deadline, not dial_timeout", time.Since(start))
				}
			})
		}
	}
}
