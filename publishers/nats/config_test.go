package nats_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
)

func TestValidate(t *testing.T) {
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("127.0.0.1:%d", 4000+i)
	}
	for _, tc := range []struct {
		name string
		edit func(*nats.Config)
		want string // "" valid; else a substring of the error
	}{
		{"defaults", func(*nats.Config) {}, ""},
		{"servers", func(c *nats.Config) { c.Servers = []string{"127.0.0.1:4222", "nats.example:4223"} }, ""},
		{"bad server", func(c *nats.Config) { c.Servers = []string{"127.0.0.1:4222", "nats://x:4222"} }, "nats.servers[1]: "},
		{"server twice", func(c *nats.Config) { c.Servers = []string{"a:1", "a:1"} }, `nats.servers[1]: "a:1" repeats nats.servers[0]`},
		{"65 servers", func(c *nats.Config) { c.Servers = many }, "nats.servers: 65 addresses, at most 64"},
		{"no servers, embedded 0", func(c *nats.Config) { c.Embedded = 0 }, "nats.embedded: must be 1..16"},
		{"embedded 17", func(c *nats.Config) { c.Embedded = 17 }, "nats.embedded: must be 1..16"},
		{"embedded ignored with servers", func(c *nats.Config) { c.Servers = []string{"a:1"}; c.Embedded = 0 }, ""},
		{"store too small", func(c *nats.Config) { c.EmbeddedMaxStore = 1000 }, "nats.embedded_max_store: must be"},
		{"store too big", func(c *nats.Config) { c.EmbeddedMaxStore = 1<<40 + 1 }, "nats.embedded_max_store: must be"},
		{"dial timeout 0", func(c *nats.Config) { c.DialTimeout = 0 }, "nats.dial_timeout: must be"},
		{"stream name", func(c *nats.Config) { c.Stream = "ORDERS-1" }, ""},
		{"stream with a dot", func(c *nats.Config) { c.Stream = "a.b" }, "nats.stream: "},
		{"stream with a space", func(c *nats.Config) { c.Stream = "a b" }, "nats.stream: "},
		{"stream with a wildcard", func(c *nats.Config) { c.Stream = "a>" }, "nats.stream: "},
		{"stream without jetstream", func(c *nats.Config) { c.Stream = "S"; c.JetStream = false }, "nats.stream: set with nats.jetstream: false"},
		{"user without password", func(c *nats.Config) { c.User = "u" }, "nats.user: nats.user and nats.password_file must be set together"},
		{"password without user", func(c *nats.Config) { c.PasswordFile = "/p" }, "must be set together"},
		{"user with a space", func(c *nats.Config) { c.User = "a b"; c.PasswordFile = "/p" }, "nats.user: "},
		{"tls embedded", func(c *nats.Config) { c.TLSConfig.Enabled = true }, "nats.tls: needs nats.servers"},
		{"tls file without tls", func(c *nats.Config) { c.Servers = []string{"a:1"}; c.CAFile = "/ca" }, "nats.tls_ca_file: set without nats.tls: true"},
		{"tls", func(c *nats.Config) { c.Servers = []string{"a:1"}; c.TLSConfig.Enabled = true; c.CAFile = "/ca" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nats.DefaultConfig()
			tc.edit(&c)
			err := c.Validate("nats")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"orders", true}, {"orders.eu.1", true}, {"a-b_c", true}, {strings.Repeat("a", 255), true},
		{"", false}, {strings.Repeat("a", 256), false}, {"a b", false}, {"a..b", false}, {".a", false}, {"a.", false},
		{"a.*", false}, {"a.>", false}, {">", false}, {"$JS.API.STREAM.DELETE.x", false}, {"$SYS.x", false},
		{"_INBOX.abc", false}, {"a\tb", false}, {"a\x7f", false}, {"é", false},
	} {
		t.Run(fmt.Sprintf("%q", tc.topic), func(t *testing.T) {
			if err := nats.ValidateTopic(tc.topic); (err == nil) != tc.ok {
				t.Errorf("ValidateTopic(%q) = %v, want ok %v", tc.topic, err, tc.ok)
			}
		})
	}
}

func TestStreamName(t *testing.T) {
	for in, want := range map[string]string{"orders": "orders", "orders.eu": "orders_eu", "a-b_c": "a-b_c"} {
		if got := nats.StreamName(in); got != want {
			t.Errorf("StreamName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLimitLog(t *testing.T) {
	var buf strings.Builder
	log := publishers.LimitLog(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 5 {
		log.Warn("lost", "addr", "a:1")
		log.Warn("lost", "addr", "b:1")
	}
	if n := strings.Count(buf.String(), "msg=lost"); n != 2 {
		t.Errorf("%d lines for 10 repeats over 2 hosts, want 2 (one per host):\n%s", n, buf.String())
	}
}
