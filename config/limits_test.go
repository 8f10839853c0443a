package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers"
)

// TestValidateLimits: every setting has a range; a value outside it, or one that cannot work (a host
// with a space, a topic a broker in use refuses), is one error naming its key.
func TestValidateLimits(t *testing.T) {
	hosts := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("127.0.0.1:%d", 4150+i)
		}
		return out
	}
	withRocketMQ := func(c *config.Config) { c.RocketMQ.NameServers = []string{"127.0.0.1:9876"} }
	for _, tc := range []struct {
		name, key string // key: the error's prefix
		set       func(*config.Config)
	}{
		{"10 000 nsq hosts", "nsq.hosts", func(c *config.Config) { c.NSQ.Hosts = hosts(10000) }},
		{"65 stomp hosts", "stomp.hosts", func(c *config.Config) { c.STOMP.Hosts = hosts(65) }},
		{"65 name servers", "rocketmq.name_servers", func(c *config.Config) { c.RocketMQ.NameServers = hosts(65) }},
		{"a space before the port", "nsq.hosts[1]", func(c *config.Config) { c.NSQ.Hosts = []string{"127.0.0.1:4150", "127.0.0.1 :4150"} }},
		{"a space in the name", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"nsq d:4150"} }},
		{"a leading space", "stomp.hosts[0]", func(c *config.Config) { c.STOMP.Hosts = []string{" broker:61613"} }},
		{"a tab in the port", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"a:41\t50"} }},
		{"port 0", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"a:0"} }},
		{"port 65536", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"a:65536"} }},
		{"port with a sign", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"a:+4150"} }},
		{"port by name", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"a:nsqd"} }},
		{"no host", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{":4150"} }},
		{"IPv6 without brackets", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"::1:4150"} }},
		{"brackets around a name", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"[nsqd]:4150"} }},
		{"brackets around IPv4", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"[127.0.0.1]:4150"} }},
		{"a bad IPv4", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"127.0.0.256:4150"} }},
		{"a label starting with -", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"-nsqd:4150"} }},
		{"an empty label", "nsq.hosts[0]", func(c *config.Config) { c.NSQ.Hosts = []string{"a..b:4150"} }},
		{"a URL", "rocketmq.name_servers[0]", func(c *config.Config) { c.RocketMQ.NameServers = []string{"http://ns:9876"} }},
		{"a host twice", "nsq.hosts[2]", func(c *config.Config) { c.NSQ.Hosts = []string{"a:1", "b:1", "a:1"} }},
		{"publish_timeout 1000h", "publish_timeout", func(c *config.Config) { c.PublishTimeout = 1000 * time.Hour }},
		{"http.write_timeout a day", "http.write_timeout", func(c *config.Config) { c.HTTP.WriteTimeout = 24 * time.Hour }},
		{"publish_timeout under 1ms", "publish_timeout", func(c *config.Config) {
			c.PublishTimeout, c.NSQ.DialTimeout = time.Microsecond, time.Microsecond
		}},
		{"async.max_in_flight 2^63-1", "async.max_in_flight", func(c *config.Config) { c.Async.MaxInFlight = 1<<63 - 1 }},
		{"http.max_connections huge", "http.max_connections", func(c *config.Config) { c.HTTP.MaxConnections = 1 << 40 }},
		{"http.max_requests huge", "http.max_requests", func(c *config.Config) { c.HTTP.MaxRequests = 1 << 40 }},
		{"http.max_header_bytes huge", "http.max_header_bytes", func(c *config.Config) { c.HTTP.MaxHeaderBytes = 1 << 40 }},
		{"topics.max_distinct huge", "topics.max_distinct", func(c *config.Config) { c.Topics.MaxDistinct = 1 << 40 }},
		{"gc_percent huge", "gc_percent", func(c *config.Config) { c.GCPercent = 1 << 40 }},
		{"gc_memory_limit tiny", "gc_memory_limit", func(c *config.Config) { c.GCMemoryLimit = 1000 }},
		{"gc_memory_limit negative", "gc_memory_limit", func(c *config.Config) { c.GCMemoryLimit = -1 }},
		{"gc_memory_limit huge", "gc_memory_limit", func(c *config.Config) { c.GCMemoryLimit = 1<<40 + 1 }},
		{"shutdown_lame_duck an hour", "shutdown_lame_duck", func(c *config.Config) { c.ShutdownLameDuck = time.Hour }},
		{"shutdown_grace a day", "shutdown_grace", func(c *config.Config) { c.ShutdownGrace = 24 * time.Hour }},
		{"nsq.dial_timeout an hour", "nsq.dial_timeout", func(c *config.Config) {
			c.PublishTimeout, c.HTTP.WriteTimeout = publishers.MaxPublishTimeout, time.Hour
			c.NSQ.DialTimeout = 2 * time.Minute
		}},
		{"nsq.embedded_max_disk huge", "nsq.embedded_max_disk", func(c *config.Config) { c.NSQ.EmbeddedMaxDisk = 1<<40 + 1 }},
		{"nsq.embedded_max_memory negative", "nsq.embedded_max_memory", func(c *config.Config) { c.NSQ.EmbeddedMaxMemory = -1 }},
		{"nsq.embedded_max_memory huge", "nsq.embedded_max_memory", func(c *config.Config) { c.NSQ.EmbeddedMaxMemory = 1<<40 + 1 }},
		{"nsq.auth_secret with embedded nsqd", "nsq.auth_secret", func(c *config.Config) { c.NSQ.AuthSecret = "s" }},
		{"nsq.auth_secret over 1024 bytes", "nsq.auth_secret", func(c *config.Config) {
			c.NSQ.Hosts, c.NSQ.AuthSecret = []string{"127.0.0.1:4150"}, publishers.Secret(strings.Repeat("s", 1025))
		}},
		{"stomp.embedded_max_bytes huge", "stomp.embedded_max_bytes", func(c *config.Config) { c.STOMP.EmbeddedMaxBytes = 1<<40 + 1 }},
		{"stomp.dial_timeout an hour", "stomp.dial_timeout", func(c *config.Config) { c.STOMP.DialTimeout = time.Hour }},
		{"stomp.heartbeat a day", "stomp.heartbeat", func(c *config.Config) { c.STOMP.HeartBeat = 24 * time.Hour }},
		{"stomp.heartbeat_receive a day", "stomp.heartbeat_receive", func(c *config.Config) { c.STOMP.HeartBeatReceive = 24 * time.Hour }},
		{"stomp.passcode with a newline", "stomp.passcode", func(c *config.Config) {
			c.STOMP.Login, c.STOMP.Passcode = "u", "p\nw"
		}},
		{"rocketmq.send_timeout an hour", "rocketmq.send_timeout", func(c *config.Config) {
			withRocketMQ(c)
			c.RocketMQ.SendTimeout = time.Hour
		}},
		{"topic invalid on nsq", "topic", func(c *config.Config) { c.Topic = "a b" }},
		{"topic2 too long for nsq", "topic2", func(c *config.Config) { c.Topic2 = strings.Repeat("t", 65) }},
		{"topic with '.' while rocketmq is in use", "topic", func(c *config.Config) {
			withRocketMQ(c)
			c.Topic = "a.b"
		}},
		{"topic with '/' while stomp is in use", "topic", func(c *config.Config) {
			c.Broker = "stomp"
			c.Topic = "/queue/x"
		}},
		{"an echo topic invalid on stomp", "echo.topics[0]", func(c *config.Config) {
			c.Broker = "stomp" // nsq not in use: one broker's error
			c.Echo.Topics = []string{"/queue/rt"}
		}},
		{"an ack suffix making the ack topic invalid", "echo.topics[0] + echo.ack_suffix", func(c *config.Config) { c.Echo.AckSuffix = "#ack" }},
		{"an echo topic twice", "echo.topics[1]", func(c *config.Config) { c.Echo.Topics = []string{"rt", "rt"} }},
		{"an echo topic the ack topic of another", "echo.topics[1]", func(c *config.Config) { c.Echo.Topics = []string{"rt", "rt_ack"} }},
		{"65 echo topics", "echo.topics", func(c *config.Config) {
			c.Echo.Topics = nil
			for i := range 65 {
				c.Echo.Topics = append(c.Echo.Topics, fmt.Sprint("rt", i))
			}
		}},
		{"an embedded broker twice", "embedded_brokers[1]", func(c *config.Config) { c.EmbeddedBrokers = []string{"stomp", "stomp"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			tc.set(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 {
				t.Errorf("want exactly one error, got %q", lines)
			}
			if !strings.HasPrefix(err.Error(), tc.key+": ") {
				t.Errorf("error %q does not start with %q", err, tc.key+": ")
			}
			if strings.Contains(err.Error(), "p\nw") {
				t.Errorf("error %q shows the passcode", err)
			}
		})
	}
}

// TestValidateLimitsAccept: the edges of the ranges and addresses of every form that can be dialled.
func TestValidateLimitsAccept(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*config.Config)
	}{
		{"64 hosts", func(c *config.Config) {
			for i := range publishers.MaxHosts {
				c.NSQ.Hosts = append(c.NSQ.Hosts, fmt.Sprintf("10.0.0.%d:4150", i))
			}
		}},
		{"IPv6 in brackets", func(c *config.Config) { c.NSQ.Hosts = []string{"[::1]:4150", "[fe80::1%eth0]:4150"} }},
		{"names", func(c *config.Config) {
			c.NSQ.Hosts = []string{"localhost:4150", "nsqd-0.nsqd.default.svc.cluster.local.:4150", "my_host:1", "a:65535"}
		}},
		{"largest durations", func(c *config.Config) {
			c.PublishTimeout, c.HTTP.WriteTimeout = publishers.MaxPublishTimeout, time.Hour
			c.NSQ.DialTimeout = time.Minute
			c.ShutdownLameDuck, c.ShutdownGrace = 5*time.Minute, 10*time.Minute
			c.STOMP.HeartBeat, c.STOMP.HeartBeatReceive = time.Hour, time.Hour
		}},
		{"largest counts", func(c *config.Config) {
			c.Async.MaxInFlight, c.HTTP.MaxConnections, c.HTTP.MaxRequests = 1_000_000, 1_000_000, 1_000_000
			c.Topics.MaxDistinct = 100_000
		}},
		{"nsq.embedded_max_memory 0", func(c *config.Config) { c.NSQ.EmbeddedMaxMemory = 0 }},
		{"gc_memory_limit 64 MiB", func(c *config.Config) { c.GCMemoryLimit = 64 << 20 }},
		{"a topic with '.' on nsq alone", func(c *config.Config) { c.Topic = "a.b" }},
		{"an invalid echo topic with the echo off", func(c *config.Config) {
			c.Echo.Enabled, c.Echo.RoundTrip = false, false
			c.Echo.Topics = []string{"a b"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			tc.set(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

// TestPrintConfigRefusesInvalidTopic: -print-config validates as the start does, so an invalid topic
// is refused by both, naming the key (cmd exits 2 on any Load error).
func TestPrintConfigRefusesInvalidTopic(t *testing.T) {
	for _, args := range [][]string{{"-print-config", "-topic", "a b"}, {"-topic", "a b"}} {
		_, _, err := config.Load(config.Sources{Args: args})
		if err == nil || !strings.HasPrefix(err.Error(), "topic: ") {
			t.Errorf("Load(%q) = %v, want an error naming topic", args, err)
		}
	}
}

// TestLoadChecksFiles: a file a setting names is read when the configuration loads, so -print-config
// and the start (both exit 2 on a Load error) refuse a missing or malformed one, naming its key.
func TestLoadChecksFiles(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	files := map[string]string{"token": "s3cret\n", "blank": "  \n"}
	readFile := func(name string) ([]byte, error) {
		if b, ok := files[name]; ok {
			return []byte(b), nil
		}
		return os.ReadFile(name)
	}
	for _, tc := range []struct {
		name string
		args []string
		key  string // "": loads
	}{
		{"token file missing", []string{"-http.auth_token_file", missing}, "http.auth_token_file"},
		{"token file blank", []string{"-http.auth_token_file", "blank"}, "http.auth_token_file"},
		{"token file fine", []string{"-http.auth_token_file", "token"}, ""},
		{"HTTPS key pair missing", []string{"-http.tls_cert_file", missing, "-http.tls_key_file", missing}, "http.tls_cert_file"},
		{"HTTPS key pair not PEM", []string{"-http.tls_cert_file", notPEM, "-http.tls_key_file", notPEM}, "http.tls_cert_file"},
		{"broker CA missing", []string{"-nsq.hosts", "127.0.0.1:4150", "-nsq.tls", "-nsq.tls_ca_file", missing}, "nsq.tls_ca_file"},
		{"broker CA not PEM", []string{"-embedded_brokers", "", "-stomp.hosts", "127.0.0.1:61613", "-stomp.tls", "-stomp.tls_ca_file", notPEM}, "stomp.tls_ca_file"},
		{"a broker not in use is not read", []string{"-rocketmq.tls", "-rocketmq.tls_ca_file", missing}, ""},
	} {
		for _, print := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, -print-config %v", tc.name, print), func(t *testing.T) {
				args := tc.args
				if print {
					args = append([]string{"-print-config"}, args...)
				}
				_, _, err := config.Load(config.Sources{Args: args, ReadFile: readFile})
				switch {
				case tc.key == "" && err != nil:
					t.Errorf("Load = %v", err)
				case tc.key != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.key+": ")):
					t.Errorf("Load = %v, want an error naming %s", err, tc.key)
				}
			})
		}
	}
}
