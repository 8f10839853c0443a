package nats_test

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestTLS: with nats.tls and the CA the publisher publishes over TLS; without the CA, or in plain text
// to a server requiring TLS, it never gets a connection and publishes fail as unavailable.
func TestTLS(t *testing.T) {
	pki := publishertest.NewPKI(t)
	caFile, cert := pki.CA, pki.KeyPair(t)
	s := startServer(t, server.Options{TLS: true, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, TLSTimeout: 2})
	addr := s.Addr().String()
	for _, tc := range []struct {
		name string
		tls  publishers.TLSConfig
		ok   bool
	}{
		{"verified", publishers.TLSConfig{Enabled: true, CAFile: caFile}, true},
		{"unknown CA", publishers.TLSConfig{Enabled: true}, false},
		{"plain text", publishers.TLSConfig{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nats.DefaultConfig()
			c.Servers = []string{addr}
			c.TLSConfig = tc.tls
			p, err := nats.New(c, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = p.Publish(ctx(t), 0, "tls.topic", []byte("x"))
			if tc.ok && err != nil {
				t.Errorf("Publish: %v", err)
			}
			if !tc.ok && !errors.Is(err, publishers.ErrUnavailable) {
				t.Errorf("Publish: %v, want unavailable", err)
			}
			// the counts come from nats.go's callbacks, which run on its own goroutine
			testwait.For(t, 5*time.Second, "connection counted", func() bool {
				got := p.ConnCounts(0)
				return tc.ok == (got.Opened == 1) && (tc.ok || got.DialFailures > 0)
			})
		})
	}
}
