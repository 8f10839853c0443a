package kafka_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/kafka"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *kafka.Config)
		want string // "" valid; else a substring of the error, naming the key
	}{
		{"defaults", func(*kafka.Config) {}, ""},
		{"brokers", func(c *kafka.Config) { c.Brokers = []string{"127.0.0.1:9092", "[::1]:9093", "kafka-0.example:9092"} }, ""},
		{"broker without port", func(c *kafka.Config) { c.Brokers = []string{"127.0.0.1:9092", "localhost"} }, "kafka.brokers[1]: "},
		{"broker port 0", func(c *kafka.Config) { c.Brokers = []string{"127.0.0.1:0"} }, "kafka.brokers[0]: "},
		{"broker twice", func(c *kafka.Config) { c.Brokers = []string{"a:1", "a:1"} }, "kafka.brokers[1]: \"a:1\" repeats kafka.brokers[0]"},
		{"too many brokers", func(c *kafka.Config) {
			for i := range publishers.MaxHosts + 1 {
				c.Brokers = append(c.Brokers, "h:"+strings.Repeat("1", 1)+string(rune('0'+i%10))+string(rune('0'+i/10)))
			}
		}, "kafka.brokers: 65 addresses"},
		{"acks leader", func(c *kafka.Config) { c.Acks = kafka.AcksLeader }, ""},
		{"acks 1", func(c *kafka.Config) { c.Acks = "1" }, "kafka.acks: "},
		{"partitions 0", func(c *kafka.Config) { c.Partitions = 0 }, "kafka.partitions: "},
		{"partitions huge", func(c *kafka.Config) { c.Partitions = 1 << 20 }, "kafka.partitions: "},
		{"replication 0", func(c *kafka.Config) { c.ReplicationFactor = 0 }, "kafka.replication_factor: "},
		{"replication 17", func(c *kafka.Config) { c.ReplicationFactor = 17 }, "kafka.replication_factor: "},
		{"client id empty", func(c *kafka.Config) { c.ClientID = "" }, "kafka.client_id: "},
		{"client id space", func(c *kafka.Config) { c.ClientID = "a b" }, "kafka.client_id: "},
		{"sasl plain", func(c *kafka.Config) { c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = kafka.SASLPlain, "u", "/p" }, ""},
		{"sasl scram", func(c *kafka.Config) {
			c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = kafka.SASLScramSHA512, "u", "/p"
		}, ""},
		{"sasl unknown", func(c *kafka.Config) { c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = "GSSAPI", "u", "/p" }, "kafka.sasl_mechanism: "},
		{"sasl without user", func(c *kafka.Config) { c.SASLMechanism, c.SASLPasswordFile = kafka.SASLScramSHA256, "/p" }, "kafka.sasl_user: required"},
		{"sasl without password", func(c *kafka.Config) { c.SASLMechanism, c.SASLUser = kafka.SASLPlain, "u" }, "kafka.sasl_password_file: required"},
		{"user without sasl", func(c *kafka.Config) { c.SASLUser = "u" }, "kafka.sasl_user: set without kafka.sasl_mechanism"},
		{"tls ca without tls", func(c *kafka.Config) { c.CAFile = "/ca.pem" }, "kafka.tls_ca_file: set without kafka.tls: true"},
		{"tls cert without key", func(c *kafka.Config) { c.Enabled, c.CertFile = true, "/c.pem" }, "kafka.tls_cert_file: "},
		{"publish timeout 0", func(c *kafka.Config) { c.PublishTimeout = 0 }, "publish_timeout: "},
		{"publish timeout huge", func(c *kafka.Config) { c.PublishTimeout = time.Hour }, "publish_timeout: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafka.DefaultConfig()
			tc.edit(&c)
			err := c.Validate("kafka")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		topic string
		ok    bool
	}{
		{"plain", "orders", true},
		{"all allowed bytes", "a.B_c-9", true},
		{"longest", strings.Repeat("t", 249), true},
		{"too long", strings.Repeat("t", 250), false},
		{"empty", "", false},
		{"dot", ".", false},
		{"dot dot", "..", false},
		{"space", "a b", false},
		{"slash", "a/b", false},
		{"non-ASCII", "tópico", false},
		{"internal", "__consumer_offsets", false},
		{"NUL", "a\x00b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := kafka.ValidateTopic(tc.topic); (err == nil) != tc.ok {
				t.Errorf("ValidateTopic(%q): %v, want ok=%v", tc.topic, err, tc.ok)
			}
		})
	}
}

// TestNewRefusesConfig: New checks the section and reads the files it names before dialling anything.
func TestNewRefusesConfig(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(c *kafka.Config)
		want string
	}{
		{"no brokers", func(*kafka.Config) {}, "kafka.brokers: at least one"},
		{"invalid", func(c *kafka.Config) { c.Brokers, c.Acks = []string{"127.0.0.1:1"}, "none" }, "kafka.acks"},
		{"password file missing", func(c *kafka.Config) {
			c.Brokers = []string{"127.0.0.1:1"}
			c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = kafka.SASLPlain, "u", filepath.Join(dir, "missing")
		}, "kafka.sasl_password_file: "},
		{"password empty", func(c *kafka.Config) {
			c.Brokers = []string{"127.0.0.1:1"}
			c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = kafka.SASLPlain, "u", empty
		}, "kafka.sasl_password_file: "},
		{"CA file missing", func(c *kafka.Config) {
			c.Brokers = []string{"127.0.0.1:1"}
			c.Enabled, c.CAFile = true, filepath.Join(dir, "missing.pem")
		}, "kafka.tls_ca_file: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafka.DefaultConfig()
			tc.edit(&c)
			start := time.Now()
			_, err := kafka.New(c, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
			if errors.Is(err, publishers.ErrUnavailable) || time.Since(start) > time.Second {
				t.Errorf("New dialled (%v, after %v): a configuration error is found before", err, time.Since(start))
			}
		})
	}
}
