package publishers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
)

// TestTLSConfigClient: the files are read when the client configuration is built, and errors name the
// setting under the section's prefix.
func TestTLSConfigClient(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     publishers.TLSConfig
		wantErr string // "" : no error
		wantNil bool   // TLS off: no configuration
	}{
		{"off", publishers.TLSConfig{}, "", true},
		{"system roots", publishers.TLSConfig{Enabled: true}, "", false},
		{"missing CA file", publishers.TLSConfig{Enabled: true, CAFile: filepath.Join(dir, "none.pem")}, "stomp.tls_ca_file: open ", false},
		{"CA file without PEM", publishers.TLSConfig{Enabled: true, CAFile: notPEM}, "stomp.tls_ca_file: " + notPEM + " holds no PEM certificate", false},
		{"bad client key pair", publishers.TLSConfig{Enabled: true, CertFile: notPEM, KeyFile: notPEM}, "stomp.tls_cert_file: ", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.Client("stomp")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Client: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("Client: %v, want an error starting %q", err, tc.wantErr)
			case tc.wantErr == "" && (got == nil) != tc.wantNil:
				t.Fatalf("Client: %v, want nil: %v", got, tc.wantNil)
			}
		})
	}
}
