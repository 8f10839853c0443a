package brokers_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/amqp"
	"github.com/mqtarget/mqtarget/publishers/brokers"
	"github.com/mqtarget/mqtarget/publishers/kafka"
	"github.com/mqtarget/mqtarget/publishers/mqtt"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

func TestRegistry(t *testing.T) {
	defaults := func() *brokers.Sections {
		s := brokers.Default()
		return &s
	}
	names := map[string]bool{}
	for _, b := range brokers.List {
		if names[b.Name] || b.Name == "" || b.AddrsKey == "" {
			t.Errorf("entry %q (addrs key %q) is unnamed or listed twice", b.Name, b.AddrsKey)
		}
		names[b.Name] = true
		if brokers.Lookup(b.Name) != b {
			t.Errorf("brokers.Lookup(%q) is not its entry", b.Name)
		}
	}
	if brokers.Lookup("pulsar") != nil {
		t.Error("brokers.Lookup(pulsar) found an entry")
	}
	if got := strings.Join(brokers.Names(), ","); got != "nsq,stomp,rocketmq,kafka,amqp,nats,mqtt" {
		t.Errorf("brokers.Names() = %s", got)
	}

	for _, tc := range []struct {
		name     string
		broker   *publishers.Broker
		set      func(*brokers.Sections)
		enabled  bool
		embedded int
	}{
		{"nsq embedded by default", nsq.Broker, func(*brokers.Sections) {}, true, 3},
		{"nsq with hosts runs no embedded nsqd", nsq.Broker, func(s *brokers.Sections) { s.NSQ.Hosts = []string{"a:1"} }, true, 0},
		{"stomp embedded by default", stomp.Broker, func(s *brokers.Sections) { s.STOMP.Embedded = 2 }, true, 2},
		{"stomp with hosts", stomp.Broker, func(s *brokers.Sections) { s.STOMP.Hosts = []string{"a:1"}; s.STOMP.Embedded = 2 }, true, 0},
		{"rocketmq disabled without name servers", rocketmq.Broker, func(*brokers.Sections) {}, false, 0},
		{"rocketmq enabled by name servers", rocketmq.Broker, func(s *brokers.Sections) { s.RocketMQ.NameServers = []string{"ns:9876"} }, true, 0},
		{"kafka disabled without brokers", kafka.Broker, func(*brokers.Sections) {}, false, 0},
		{"kafka enabled by brokers", kafka.Broker, func(s *brokers.Sections) { s.Kafka.Brokers = []string{"k:9092"} }, true, 0},
		{"amqp disabled without urls", amqp.Broker, func(*brokers.Sections) {}, false, 0},
		{"mqtt embedded by default", mqtt.Broker, func(*brokers.Sections) {}, true, 3},
		{"mqtt with servers", mqtt.Broker, func(s *brokers.Sections) { s.MQTT.Servers = []string{"m:1883"} }, true, 0},
		{"nats embedded by default", nats.Broker, func(*brokers.Sections) {}, true, 3},
		{"nats with servers", nats.Broker, func(s *brokers.Sections) { s.NATS.Servers = []string{"n:4222"} }, true, 0},
		{"amqp enabled by urls", amqp.Broker, func(s *brokers.Sections) { s.AMQP.URLs = []string{"amqp://h:5672/"} }, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := defaults()
			tc.set(s)
			if got := tc.broker.Enabled(s); got != tc.enabled {
				t.Errorf("Enabled = %v, want %v", got, tc.enabled)
			}
			if got := tc.broker.Embedded(s); got != tc.embedded {
				t.Errorf("Embedded = %d, want %d", got, tc.embedded)
			}
		})
	}

	t.Run("Open without addresses names the setting", func(t *testing.T) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		for _, b := range brokers.List {
			_, err := b.Open(defaults(), nil, publishers.Common{}, log)
			if err == nil || !strings.HasPrefix(err.Error(), b.AddrsSetting()+": ") {
				t.Errorf("%s: Open(no addresses) = %v, want an error naming %s", b.Name, err, b.AddrsSetting())
			}
		}
	})
	t.Run("Validate prefixes errors with the broker's name", func(t *testing.T) {
		s := defaults()
		s.NSQ.Hosts, s.STOMP.Hosts, s.RocketMQ.NameServers = []string{"x"}, []string{"x"}, []string{"x"}
		s.Kafka.Brokers, s.AMQP.URLs, s.NATS.Servers, s.MQTT.Servers = []string{"x"}, []string{"x"}, []string{"x"}, []string{"x"}
		for _, b := range brokers.List {
			err := b.Validate(s, publishers.Common{})
			if err == nil || !strings.HasPrefix(err.Error(), b.Name+".") {
				t.Errorf("%s: Validate = %v", b.Name, err)
			}
		}
	})
}

// TestEveryEmbeddedModeHasAServer: an entry with an embedded count has the server to start.
func TestEveryEmbeddedModeHasAServer(t *testing.T) {
	for _, b := range brokers.List {
		if (b.Hooks.Embedded != nil) != (b.Hooks.Embed != nil) {
			t.Errorf("%s: an embedded count without a server, or a server without a count", b.Name)
		}
	}
}
