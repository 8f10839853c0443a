package publishers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// TLSConfig is a broker section's TLS client settings. Each section inlines it, so its keys are
// <broker>.tls, <broker>.tls_ca_file and so on.
type TLSConfig struct {
	Enabled bool `yaml:"tls" help:"connect to the broker over TLS (see docs/tls.md)"`
	// CAFile holds the PEM certificates the broker's certificate must chain to; empty: the system's roots.
	CAFile string `yaml:"tls_ca_file" help:"PEM file of the CA certificates the broker's certificate is verified against (empty: the system's roots)"`
	// ServerName is the name checked in the broker's certificate; empty: each address's host part.
	ServerName string `yaml:"tls_server_name" help:"name the broker's certificate must be valid for (empty: the host part of each address)"`
	// InsecureSkipVerify accepts any certificate: encryption without knowing who is at the other end.
	InsecureSkipVerify bool `yaml:"tls_insecure_skip_verify" help:"accept any broker certificate without verifying it (testing only)"`
	// CertFile and KeyFile are a client certificate, for brokers that require one.
	CertFile string `yaml:"tls_cert_file" help:"PEM client certificate for brokers that require one (with tls_key_file)"`
	KeyFile  string `yaml:"tls_key_file" help:"PEM private key of tls_cert_file"`
}

// Validate checks the settings' combination; the files are read by Client, at start.
func (c TLSConfig) Validate(prefix string) error {
	var errs []error
	if !c.Enabled {
		for _, f := range []struct {
			key string
			set bool
		}{
			{"tls_ca_file", c.CAFile != ""}, {"tls_server_name", c.ServerName != ""},
			{"tls_insecure_skip_verify", c.InsecureSkipVerify}, {"tls_cert_file", c.CertFile != ""}, {"tls_key_file", c.KeyFile != ""},
		} {
			if f.set {
				errs = append(errs, fmt.Errorf("%s.%s: set without %s.tls: true", prefix, f.key, prefix))
			}
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s.tls_cert_file: tls_cert_file and tls_key_file must be set together", prefix))
	}
	if c.InsecureSkipVerify && c.CAFile != "" {
		errs = append(errs, fmt.Errorf("%s.tls_ca_file: pointless with %s.tls_insecure_skip_verify, which verifies nothing", prefix, prefix))
	}
	return errors.Join(errs...)
}

// Client builds the crypto/tls client configuration, reading the CA and key files; nil when TLS is off.
// Errors name the setting under prefix.
func (c TLSConfig) Client(prefix string) (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // opt-in, documented as testing only
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls_ca_file: %w", prefix, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.tls_ca_file: %s holds no PEM certificate", prefix, c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls_cert_file: %w", prefix, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// forAddr returns tc for a connection to addr: with ServerName set to addr's host unless configured.
func forAddr(tc *tls.Config, addr string) *tls.Config {
	if tc.ServerName != "" {
		return tc
	}
	tc = tc.Clone()
	tc.ServerName, _, _ = net.SplitHostPort(addr)
	return tc
}

// startTLS runs the client side of a TLS handshake on conn within ctx. A failure (an unknown CA, a name
// mismatch, a plain-text peer) is ErrUnavailable: the broker cannot be reached as configured.
func StartTLS(ctx context.Context, conn net.Conn, tc *tls.Config, addr string) (net.Conn, error) {
	tlsConn := tls.Client(conn, forAddr(tc, addr))
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			// like a dial that timed out: the broker is unavailable, this is not the publish's deadline
			// (a plain-text port waits for a request and never answers the handshake)
			err = errors.New("no answer in time (a plain-text port?)")
		}
		return nil, Wrap(ErrUnavailable, fmt.Errorf("TLS handshake with %s: %w", addr, err))
	}
	return tlsConn, nil
}

// verifyAsConfigured returns tc for clients that set ServerName themselves (some set each address's
// host): with tls_server_name configured, the library's check is replaced by ours against that name.
func VerifyAsConfigured(tc *tls.Config) *tls.Config {
	if tc.ServerName == "" || tc.InsecureSkipVerify {
		return tc
	}
	tc = tc.Clone()
	name, roots := tc.ServerName, tc.RootCAs
	tc.InsecureSkipVerify = true //nolint:gosec // VerifyConnection below verifies, against the configured name
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the broker sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: name, Intermediates: inter})
		return err
	}
	return tc
}
