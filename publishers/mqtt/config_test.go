package mqtt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("127.0.0.1:%d", 1000+i)
	}
	cases := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; "" for valid
	}{
		{"defaults, embedded", func(*Config) {}, ""},
		{"servers", func(c *Config) { c.Servers = []string{"127.0.0.1:1883", "[::1]:1883", "mqtt.example:8883"} }, ""},
		{"bad server", func(c *Config) { c.Servers = []string{"127.0.0.1:1883", "localhost"} }, "mqtt.servers[1]: "},
		{"port 0", func(c *Config) { c.Servers = []string{"127.0.0.1:0"} }, "mqtt.servers[0]: "},
		{"space in host", func(c *Config) { c.Servers = []string{"my host:1883"} }, "mqtt.servers[0]: "},
		{"server twice", func(c *Config) { c.Servers = []string{"127.0.0.1:1883", "127.0.0.1:1883"} }, "mqtt.servers[1]: \"127.0.0.1:1883\" repeats mqtt.servers[0]"},
		{"65 servers", func(c *Config) { c.Servers = many }, "mqtt.servers: 65 addresses, at most 64"},
		{"qos 3", func(c *Config) { c.QoS = 3 }, "mqtt.qos: must be 0, 1 or 2"},
		{"qos -1", func(c *Config) { c.QoS = -1 }, "mqtt.qos: "},
		{"qos 0", func(c *Config) { c.QoS = 0 }, ""},
		{"version 3.1.1", func(c *Config) { c.Version = "3.1.1" }, ""},
		{"version 3.1.1 with servers and qos 2", func(c *Config) { c.Version, c.QoS, c.Servers = "3.1.1", 2, []string{"127.0.0.1:1883"} }, ""},
		{"version 4", func(c *Config) { c.Version = "4" }, `mqtt.version: must be 5 or 3.1.1, got "4"`},
		{"version 3.1", func(c *Config) { c.Version = "3.1" }, "mqtt.version: must be 5 or 3.1.1"},
		{"version 5.0", func(c *Config) { c.Version = "5.0" }, "mqtt.version: "},
		{"version empty", func(c *Config) { c.Version = "" }, "mqtt.version: "},
		{"client_id control", func(c *Config) { c.ClientID = "a\nb" }, "mqtt.client_id: "},
		{"client_id too long", func(c *Config) { c.ClientID = strings.Repeat("a", 65) }, "mqtt.client_id: 65 bytes"},
		{"client_id empty", func(c *Config) { c.ClientID = "" }, ""},
		{"user bad utf-8", func(c *Config) { c.User = "\xff" }, "mqtt.user: is not valid UTF-8"},
		{"password_file without user", func(c *Config) { c.PasswordFile = "/x" }, "mqtt.password_file: set without mqtt.user"},
		{"dial_timeout 0", func(c *Config) { c.DialTimeout = 0 }, "mqtt.dial_timeout: "},
		{"dial_timeout 2m", func(c *Config) { c.DialTimeout = 2 * time.Minute }, "mqtt.dial_timeout: "},
		{"keepalive 1.5s", func(c *Config) { c.KeepAlive = 1500 * time.Millisecond }, "mqtt.keepalive: must be a whole number of seconds"},
		{"keepalive 0", func(c *Config) { c.KeepAlive = 0 }, "mqtt.keepalive: "},
		{"keepalive 65536s", func(c *Config) { c.KeepAlive = 65536 * time.Second }, "mqtt.keepalive: "},
		{"keepalive 65535s", func(c *Config) { c.KeepAlive = 65535 * time.Second }, ""},
		{"max_inflight 0", func(c *Config) { c.MaxInFlight = 0 }, "mqtt.max_inflight: must be 1..65535"},
		{"max_inflight 65536", func(c *Config) { c.MaxInFlight = 65536 }, "mqtt.max_inflight: "},
		{"embedded 0 without servers", func(c *Config) { c.Embedded = 0 }, "mqtt.embedded: must be 1..16 when mqtt.servers is empty"},
		{"embedded 17", func(c *Config) { c.Embedded = 17 }, "mqtt.embedded: "},
		{"embedded 0 with servers", func(c *Config) { c.Embedded = 0; c.Servers = []string{"127.0.0.1:1883"} }, ""},
		{"tls embedded", func(c *Config) { c.TLSConfig.Enabled = true }, "mqtt.tls: needs mqtt.servers"},
		{"tls_ca_file without tls", func(c *Config) { c.TLSConfig.CAFile = "ca.pem" }, "mqtt.tls: "},
		{"cert without key", func(c *Config) {
			c.Servers = []string{"127.0.0.1:8883"}
			c.TLSConfig.Enabled, c.TLSConfig.CertFile = true, "c.pem"
		}, "mqtt.tls_cert_file: tls_cert_file and tls_key_file must be set together"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(&c)
			err := c.Validate("mqtt")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Fatalf("Validate: nil, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestValidateTopic(t *testing.T) {
	cases := []struct {
		topic string
		ok    bool
	}{
		{"t", true},
		{"a/b/c", true},
		{"sensors/ünïcode", true},
		{strings.Repeat("a", MaxTopicLen), true},
		{"", false},
		{strings.Repeat("a", MaxTopicLen+1), false},
		{"a/+/b", false},
		{"a/#", false},
		{"$SYS/x", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"\xff", false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q", tc.topic), func(t *testing.T) {
			if err := ValidateTopic(tc.topic); (err == nil) != tc.ok {
				t.Fatalf("ValidateTopic(%q) = %v, want ok=%v", tc.topic, err, tc.ok)
			}
		})
	}
}

func TestNewReadsFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "pw")
	if err := os.WriteFile(good, []byte("secret\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, want string
	}{
		{"password file", good, ""},
		{"missing password file", filepath.Join(dir, "nope"), "mqtt.password_file: "},
		{"empty first line", empty, "mqtt.password_file: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Servers = []string{"127.0.0.1:1"}
			c.User, c.PasswordFile = "u", tc.file
			p, err := New(c, discard())
			if err == nil {
				defer func() { _ = p.Close() }()
				if string(p.d.password) != "secret" {
					t.Errorf("password %q, want the first line", p.d.password)
				}
			}
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
	c := DefaultConfig()
	if _, err := New(c, discard()); err == nil || !strings.Contains(err.Error(), "mqtt.servers") {
		t.Errorf("New without servers: %v, want an error naming mqtt.servers", err)
	}
}

// TestSetupVersionKeys: GET /'s setup names the protocol spoken "mqtt_version", never "version", which
// on GET / (and in mqtarget load's result) is the broker's own version: with "version": "3.1.1" an
// external broker's result named the protocol as the broker's version, and the embedded servers'
// "version" overwrote the protocol's.
func TestSetupVersionKeys(t *testing.T) {
	for _, v := range []string{"5", version311} {
		c := DefaultConfig()
		c.Version = v
		got := Broker.Hooks.Setup(&c)
		if _, ok := got["version"]; ok || got["mqtt_version"] != v {
			t.Errorf("Setup at %s = %v, want mqtt_version %q and no version", v, got, v)
		}
	}
}
