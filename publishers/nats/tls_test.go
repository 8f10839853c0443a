package nats_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// testCA makes a CA and a server certificate for 127.0.0.1; it returns the CA's PEM file and the
// server's key pair.
func testCA(t *testing.T) (string, tls.Certificate) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
}

// TestTLS: with nats.tls and the CA the publisher publishes over TLS; without the CA, or in plain text
// to a server requiring TLS, it never gets a connection and publishes fail as unavailable.
func TestTLS(t *testing.T) {
	caFile, cert := testCA(t)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true, JetStream: true, StoreDir: t.TempDir(),
		TLS: true, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, TLSTimeout: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("TLS server not ready")
	}
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
			waitFor(t, 5*time.Second, "connection counted", func() bool {
				got := p.ConnCounts(0)
				return tc.ok == (got.Opened == 1) && (tc.ok || got.DialFailures > 0)
			})
		})
	}
}
