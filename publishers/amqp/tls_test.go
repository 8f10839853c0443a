package amqp

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
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// selfSigned makes a certificate for 127.0.0.1 and "broker.test", and the PEM file of it as a CA.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"broker.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// TestTLS: amqps:// with the shared tls_* settings: verified against the configured CA and name, and
// refused (unavailable, within dial_timeout) otherwise.
func TestTLS(t *testing.T) {
	cert, ca := selfSigned(t)
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
			start := time.Now()
			err := p.Publish(ctxT(t, 3*time.Second), 0, "t", []byte("x"))
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Publish: %v", err)
			case !tc.ok && !errors.Is(err, publishers.ErrUnavailable):
				t.Fatalf("Publish: %v, want ErrUnavailable", err)
			case time.Since(start) > 2*time.Second:
				t.Fatalf("took %v (dial_timeout is 1s)", time.Since(start))
			}
		})
	}
}
