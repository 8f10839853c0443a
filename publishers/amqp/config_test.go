package amqp

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", 256)
	many := make(URLs, 65)
	for i := range many {
		many[i] = fmt.Sprintf("amqp://h%d:5672/", i)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string // substrings of the error; none: valid
	}{
		{name: "defaults, no URLs", edit: func(*Config) {}},
		{name: "full URL", edit: func(c *Config) { c.URLs = URLs{"amqp://u:p@127.0.0.1:5672/"} }},
		{name: "no credentials, default port, vhost", edit: func(c *Config) { c.URLs = URLs{"amqp://rabbit.example/prod", "amqp://[::1]:5673"} }},
		{name: "vhost with an encoded slash", edit: func(c *Config) { c.URLs = URLs{"amqp://h:1/%2Fprod"} }},
		{name: "bad scheme", edit: func(c *Config) { c.URLs = URLs{"amqp://h:1/", "http://u:pw@h:2/"} }, want: []string{"amqp.urls[1]: scheme \"http\""}},
		{name: "no host", edit: func(c *Config) { c.URLs = URLs{"amqp:///vh"} }, want: []string{"amqp.urls[0]: has no host"}},
		{name: "bad port", edit: func(c *Config) { c.URLs = URLs{"amqp://h:0/"} }, want: []string{"amqp.urls[0]: ", "port must be a number 1..65535"}},
		{name: "query", edit: func(c *Config) { c.URLs = URLs{"amqp://h:1/?heartbeat=0"} }, want: []string{"amqp.urls[0]: takes no query parameters"}},
		{name: "fragment", edit: func(c *Config) { c.URLs = URLs{"amqp://h:1/#x"} }, want: []string{"amqp.urls[0]: takes no #fragment"}},
		{name: "vhost with a raw slash", edit: func(c *Config) { c.URLs = URLs{"amqp://h:1/a/b"} }, want: []string{"amqp.urls[0]: vhost: a / in the vhost"}},
		{name: "unparsable, password not shown", edit: func(c *Config) { c.URLs = URLs{"amqp://u:se cr%zz@h:1/"} }, want: []string{"amqp.urls[0]: is not a URL"}},
		{name: "duplicate", edit: func(c *Config) { c.URLs = URLs{"amqp://a:pw1@h:1/", "amqp://b:pw2@h:1"} }, want: []string{"amqp.urls[1]: h:1 repeats amqp.urls[0]"}},
		{name: "same server, other vhost", edit: func(c *Config) { c.URLs = URLs{"amqp://h:1/a", "amqp://h:1/b"} }},
		{name: "too many", edit: func(c *Config) { c.URLs = many }, want: []string{"amqp.urls: 65 URLs, at most 64"}},
		{name: "amqps without tls", edit: func(c *Config) { c.URLs = URLs{"amqps://h:1/"} }, want: []string{"amqp.urls[0]: amqps:// needs amqp.tls: true"}},
		{name: "amqp with tls", edit: func(c *Config) { c.URLs = URLs{"amqp://h:1/"}; c.TLSConfig.Enabled = true }, want: []string{"amqp.urls[0]: amqp:// with amqp.tls: true"}},
		{name: "amqps with tls", edit: func(c *Config) { c.URLs = URLs{"amqps://h/"}; c.TLSConfig.Enabled = true }},
		{name: "tls file without tls", edit: func(c *Config) { c.TLSConfig.CAFile = "ca.pem" }, want: []string{"amqp.tls_ca_file: set without amqp.tls: true"}},
		{name: "exchange too long", edit: func(c *Config) { c.Exchange = long }, want: []string{"amqp.exchange: is 256 bytes"}},
		{name: "exchange control char", edit: func(c *Config) { c.Exchange = "a\nb" }, want: []string{"amqp.exchange: ", "control character"}},
		{name: "mandatory without confirm", edit: func(c *Config) { c.Confirm = false }, want: []string{"amqp.mandatory: needs amqp.confirm: true"}},
		{name: "no confirm, no mandatory", edit: func(c *Config) { c.Confirm, c.Mandatory = false, false }},
		{name: "heartbeat fraction", edit: func(c *Config) { c.Heartbeat = 1500 * time.Millisecond }, want: []string{"amqp.heartbeat: must be a whole number of seconds"}},
		{name: "heartbeat zero", edit: func(c *Config) { c.Heartbeat = 0 }, want: []string{"amqp.heartbeat: "}},
		{name: "heartbeat huge", edit: func(c *Config) { c.Heartbeat = time.Hour }, want: []string{"amqp.heartbeat: "}},
		{name: "dial timeout", edit: func(c *Config) { c.DialTimeout = 0 }, want: []string{"amqp.dial_timeout: must be 1ns..1m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate("amqp")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, secret := range []string{"pw", "se cr", "%zz"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the password", err)
				}
			}
		})
	}
}

// TestURLsRedacted: printed as YAML (-print-config, /config) or formatted, a URL shows no password.
func TestURLsRedacted(t *testing.T) {
	u := URLs{"amqp://user:s3cret@h:1/vh", "amqp://nopass@h:2/", "amqp://u:bad pw%zz@h:3/"}
	y, err := yaml.Marshal(struct {
		URLs URLs `yaml:"urls"`
	}{u})
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{string(y), u.String(), fmt.Sprint(u), fmt.Sprintf("%v", u)} {
		if strings.Contains(out, "s3cret") || strings.Contains(out, "bad pw") {
			t.Errorf("password shown: %s", out)
		}
		if !strings.Contains(out, "amqp://user:redacted@h:1/vh") || !strings.Contains(out, "amqp://nopass@h:2/") {
			t.Errorf("not the redacted URLs: %s", out)
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		name, topic string
		ok          bool
	}{
		{"plain", "orders", true},
		{"dots and unicode", "orders.eu-1.ünïcode", true},
		{"255 bytes", strings.Repeat("q", 255), true},
		{"empty", "", false},
		{"256 bytes", strings.Repeat("q", 256), false},
		{"reserved amq.", "amq.gen-1", false},
		{"control", "a\x00b", false},
		{"leading space", " a", false},
		{"invalid utf-8", "a\xff", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateTopic(tc.topic); (err == nil) != tc.ok {
				t.Fatalf("ValidateTopic(%q) = %v, want ok %v", tc.topic, err, tc.ok)
			}
		})
	}
}

// TestHostsName: Hosts shows host:port, with the vhost unless it is "/", never the credentials.
func TestHostsName(t *testing.T) {
	c := DefaultConfig()
	c.URLs = URLs{"amqp://u:pw@h:1/", "amqp://u:pw@h:1/prod", "amqp://h", "amqp://h:2/%2F"}
	p, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := []string{"h:1", "h:1/prod", "h:5672", "h:2"}
	for i, w := range want {
		if p.Hosts()[i] != w {
			t.Errorf("Hosts()[%d] = %q, want %q", i, p.Hosts()[i], w)
		}
	}
	if got := p.hosts[1].srv; got.vhost != "prod" || got.user != "u" || got.password != "pw" {
		t.Errorf("parsed %+v", got)
	}
	if got := p.hosts[2].srv; got.user != "guest" || got.vhost != "/" {
		t.Errorf("defaults %+v", got)
	}
}
