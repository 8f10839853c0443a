package kafka_test

import (
	"context"
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
	"github.com/mqtarget/mqtarget/publishers/kafka"
	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// testCert makes a self-signed certificate for 127.0.0.1 and writes it as a CA file under dir.
func testCert(t *testing.T, dir, name string) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// TestTLS: with kafka.tls the connections are TLS (the checked connection over it), verified against
// tls_ca_file; a broker whose certificate is from another CA is unavailable, named at New.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	cert, ca := testCert(t, dir, "broker")
	_, otherCA := testCert(t, dir, "other")
	tf := startFakeTLS(t, pt.Honest, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	for _, tc := range []struct {
		name, ca string
		ok       bool
	}{
		{"the broker's CA", ca, true},
		{"another CA", otherCA, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafka.DefaultConfig()
			c.Brokers = tf.Addrs()
			c.Enabled, c.CAFile = true, tc.ca
			p, err := kafka.New(c, pt.Logger(t))
			if !tc.ok {
				if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "kafka.brokers") {
					t.Errorf("New: %v, want ErrUnavailable naming kafka.brokers", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.Publish(ctx, 0, "tls", []byte("over tls")); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if err := p.PublishBatch(ctx, 0, "tls", [][]byte{[]byte("b1"), []byte("b2")}); err != nil {
				t.Fatalf("PublishBatch: %v", err)
			}
			if got := tf.Stored(); got["over tls"] != 1 || got["b1"] != 1 {
				t.Errorf("stored %v", got)
			}
		})
	}
}
