package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// TestBrokerValidation checks the validation config derives from the broker registry: the broker
// setting must name a registry entry that the configuration enables, and every section is validated
// under its own key whichever broker is the default.
func TestBrokerValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*config.Config)
		want []string // prefixes of the errors, one per line, in order; nil: valid
		has  []string // substrings of the whole error
	}{
		{"defaults", func(*config.Config) {}, nil, nil},
		{"stomp embedded", func(c *config.Config) { c.Broker = "stomp" }, nil, nil},
		{"stomp external", func(c *config.Config) { c.Broker = "stomp"; c.STOMP.Hosts = []string{"a:61613"} }, nil, nil},
		{"rocketmq with name servers", func(c *config.Config) {
			c.Broker = "rocketmq"
			c.RocketMQ.NameServers = []string{"ns:9876"}
		}, nil, nil},
		{"unknown broker lists the registry", func(c *config.Config) { c.Broker = "pulsar" },
			[]string{"broker: "}, []string{`"pulsar"`, strings.Join(brokers.Names(), ", ")}},
		{"empty broker", func(c *config.Config) { c.Broker = "" }, []string{"broker: "}, nil},
		{"broker names are case-sensitive", func(c *config.Config) { c.Broker = "NSQ" }, []string{"broker: "}, nil},
		{"rocketmq without name servers", func(c *config.Config) { c.Broker = "rocketmq" },
			[]string{"rocketmq.name_servers: "}, []string{`broker "rocketmq" is not enabled by this configuration`}},
		{"rocketmq section checked when not the default", func(c *config.Config) { c.RocketMQ.NameServers = []string{"nohost"} },
			[]string{"rocketmq.name_servers[0]: "}, nil},
		{"rocketmq bad name server is not also reported disabled", func(c *config.Config) {
			c.Broker = "rocketmq"
			c.RocketMQ.NameServers = []string{"nohost"}
		}, []string{"rocketmq.name_servers[0]: "}, nil},
		{"stomp section checked when not the default", func(c *config.Config) { c.STOMP.Hosts = []string{"a:1", ":2"} },
			[]string{"stomp.hosts[1]: "}, nil},
		{"nsq embedded 0 disables the default broker", func(c *config.Config) { c.NSQ.Embedded = 0 },
			[]string{"nsq.hosts: "}, []string{`broker "nsq" is not enabled`}},
		{"nsq embedded 0 beside another default broker", func(c *config.Config) { c.Broker = "stomp"; c.NSQ.Embedded = 0 }, nil, nil},
		{"stomp embedded 0 while not in use", func(c *config.Config) { c.STOMP.Embedded = 0 }, nil, nil},
		{"nsq embedded 17 still refused", func(c *config.Config) { c.NSQ.Embedded = 17 }, []string{"nsq.embedded: "}, nil},
		{"embedded_brokers lists stomp", func(c *config.Config) { c.EmbeddedBrokers = []string{"stomp"} }, nil, nil},
		{"embedded_brokers unknown broker", func(c *config.Config) { c.EmbeddedBrokers = []string{"stomp", "pulsar"} },
			[]string{"embedded_brokers[1]: "}, []string{`"pulsar"`}},
		{"embedded_brokers without embedded mode", func(c *config.Config) { c.EmbeddedBrokers = []string{"rocketmq"} },
			[]string{"embedded_brokers[0]: "}, []string{"rocketmq.name_servers"}},
		{"embedded_brokers with embedded 0", func(c *config.Config) {
			c.EmbeddedBrokers = []string{"stomp"}
			c.STOMP.Embedded = 0
		}, []string{"embedded_brokers[0]: "}, nil},
		{"readyz.brokers names a broker in use", func(c *config.Config) {
			c.Readyz.Brokers = []string{"nsq", "stomp"}
			c.STOMP.Hosts = []string{"a:61613"}
		}, nil, nil},
		{"readyz.brokers names an unused broker", func(c *config.Config) { c.Readyz.Brokers = []string{"nsq", "stomp"} },
			[]string{"readyz.brokers[1]: "}, []string{`"stomp" is not enabled`}},
		{"readyz.timeout zero", func(c *config.Config) { c.Readyz.Timeout = 0 }, []string{"readyz.timeout: "}, nil},
		{"nsq dial timeout bounded by publish_timeout", func(c *config.Config) { c.PublishTimeout = 100 * time.Millisecond },
			[]string{"nsq.dial_timeout: "}, []string{"publish_timeout 100ms"}},
		{"errors of several sections, in registry order", func(c *config.Config) {
			c.Broker = "pulsar"
			c.NSQ.Hosts = []string{"x"}
			c.STOMP.Prefix = "queue"
			c.RocketMQ.Group = ""
		}, []string{"nsq.hosts[0]: ", "stomp.prefix: ", "rocketmq.group: ", "broker: "}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			tc.set(&c)
			err := c.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("errors %q, want %d starting with %q", lines, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d %q does not start with %q", i, lines[i], w)
				}
			}
			for _, h := range tc.has {
				if !strings.Contains(err.Error(), h) {
					t.Errorf("error %q lacks %q", err, h)
				}
			}
		})
	}
}

// TestEveryRegistryBroker: each registry entry can be the broker setting; with the defaults it is
// either enabled (an embedded mode) or refused naming the setting that would enable it, and its
// section is a configuration section of the same name.
func TestEveryRegistryBroker(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range config.Keys() {
		keys[k[0]] = true
	}
	for _, b := range brokers.List {
		t.Run(b.Name, func(t *testing.T) {
			if !keys[b.AddrsSetting()] {
				t.Errorf("%s is not a configuration key", b.AddrsSetting())
			}
			c := config.Default()
			c.Broker = b.Name
			err := c.Validate()
			if enabled := b.Enabled(&c.Sections); enabled != (err == nil) {
				t.Fatalf("Enabled = %v but Validate() = %v", enabled, err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), b.AddrsSetting()+": ") {
				t.Errorf("error %q does not name %s", err, b.AddrsSetting())
			}
			if err != nil && b.Embedded(&c.Sections) != 0 {
				t.Errorf("disabled but Embedded = %d", b.Embedded(&c.Sections))
			}
		})
	}
}
