package nsq

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nsqio/go-nsq"
)

// The hand-written frames must be byte-identical to go-nsq's own commands.
func TestNSQFramesMatchGoNSQ(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 70000)
	cases := []struct {
		name   string
		topic  string
		bodies [][]byte
	}{
		{"one small", "t", [][]byte{[]byte("hello")}},
		{"ephemeral topic", "t#ephemeral", [][]byte{[]byte("x")}},
		{"large body", "bench-7", [][]byte{big}},
		{"batch of two", "t", [][]byte{[]byte("a"), []byte("bb")}},
		{"batch with large", "t", [][]byte{big, []byte("z")}},
	}
	encode := func(cmd *nsq.Command) []byte {
		var buf bytes.Buffer
		if _, err := cmd.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.bodies) == 1 {
				if got, want := appendPUB(nil, c.topic, c.bodies[0]), encode(nsq.Publish(c.topic, c.bodies[0])); !bytes.Equal(got, want) {
					t.Errorf("PUB frame differs from go-nsq's:\n got %q\nwant %q", got[:min(len(got), 40)], want[:min(len(want), 40)])
				}
			}
			cmd, err := nsq.MultiPublish(c.topic, c.bodies)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := appendMPUB(nil, c.topic, c.bodies), encode(cmd); !bytes.Equal(got, want) {
				t.Errorf("MPUB frame differs from go-nsq's:\n got %q\nwant %q", got[:min(len(got), 40)], want[:min(len(want), 40)])
			}
		})
	}
}

func TestNSQConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; empty means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"hosts", func(c *Config) { c.Hosts = []string{"127.0.0.1:4150", "nsqd-2:4150"} }, ""},
		{"second host without port", func(c *Config) { c.Hosts = []string{"127.0.0.1:4150", "nsqd-2"} }, "nsq.hosts[1]:"},
		{"host without name", func(c *Config) { c.Hosts = []string{":4150"} }, "nsq.hosts[0]:"},
		{"port not numeric", func(c *Config) { c.Hosts = []string{"a:http"} }, "nsq.hosts[0]:"},
		{"no producers", func(c *Config) { c.ProducersPerHost = 0 }, "nsq.producers_per_host:"},
		{"dial timeout zero", func(c *Config) { c.DialTimeout = 0 }, "nsq.dial_timeout:"},
		{"embedded zero without hosts", func(c *Config) { c.Embedded = 0 }, "nsq.embedded:"},
		{"embedded zero with hosts", func(c *Config) { c.Embedded = 0; c.Hosts = []string{"a:1"} }, ""},
		{"embedded disk under 1 MiB", func(c *Config) { c.EmbeddedMaxDisk = 1<<20 - 1 }, "nsq.embedded_max_disk:"},
		{"embedded disk unused with hosts", func(c *Config) { c.EmbeddedMaxDisk = 0; c.Hosts = []string{"a:1"} }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.mutate(&cfg)
			err := cfg.Validate("nsq")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}

// TestUnauthorizedTopic: the topic is read from nsqd's E_UNAUTHORIZED words (CheckAuth's %q); any
// other error names none.
func TestUnauthorizedTopic(t *testing.T) {
	for _, tc := range []struct{ name, reason, want string }{
		{"PUB", `E_UNAUTHORIZED AUTH failed for PUB on "orders" ""`, "orders"},
		{"MPUB", `E_UNAUTHORIZED AUTH failed for MPUB on "orders#ephemeral" ""`, "orders#ephemeral"},
		{"no authorizations", "E_UNAUTHORIZED AUTH no authorizations found", ""},
		{"another error", `E_BAD_TOPIC PUB topic name "a b" is not valid`, ""},
		{"unquoted", "E_UNAUTHORIZED AUTH failed for PUB on orders", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unauthorizedTopic(tc.reason); got != tc.want {
				t.Errorf("unauthorizedTopic(%q) = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
