package publishertest

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

	"github.com/mqtarget/mqtarget/publishers"
)

// RefusedWithin checks a publish to a broker whose connection must fail (an untrusted certificate, TLS
// to a plain port): publish fails as unavailable within bound, ended by dial_timeout rather than the
// caller's deadline. what names the case in failures.
func RefusedWithin(t testing.TB, what string, bound time.Duration, publish func() error) {
	t.Helper()
	start := time.Now()
	err := publish()
	took := time.Since(start)
	switch {
	case !errors.Is(err, publishers.ErrUnavailable):
		t.Errorf("%s: Publish: %v, want ErrUnavailable", what, err)
	case took > bound:
		t.Errorf("%s: refused after %v: it waited for the caller's deadline, not dial_timeout", what, took.Round(time.Millisecond))
	default:
		t.Logf("%s: %v", what, err)
	}
}

// SelfSigned makes a self-signed certificate for 127.0.0.1 and "broker.test", valid for an hour, and
// writes it as a PEM CA file in a temp dir of t: a fake broker's TLS listener serves the certificate,
// the publisher's tls_ca_file names the file.
func SelfSigned(t testing.TB) (tls.Certificate, string) {
	t.Helper()
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

// PKI is a throwaway CA and a server certificate it signed for 127.0.0.1 and localhost, valid for a
// day, as PEM files in a temp dir: for real brokers and servers that read their certificate from files.
type PKI struct{ CA, Cert, Key string }

// NewPKI makes a PKI in a temp dir of t.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mqtarget test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	ca, err := x509.ParseCertificate(caDER)
	must(err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(err)
	p := PKI{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server.key")}
	for file, block := range map[string]*pem.Block{
		p.CA: {Type: "CERTIFICATE", Bytes: caDER}, p.Cert: {Type: "CERTIFICATE", Bytes: der}, p.Key: {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		must(os.WriteFile(file, pem.EncodeToMemory(block), 0o600))
	}
	return p
}

// KeyPair is the server's certificate and key, for a server started in the test process.
func (p PKI) KeyPair(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
