package publishers

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	defaults := func() *Sections {
		s := DefaultSections()
		return &s
	}
	names := map[string]bool{}
	for _, b := range Brokers {
		if names[b.Name] || b.Name == "" || b.AddrsKey == "" {
			t.Errorf("entry %q (addrs key %q) is unnamed or listed twice", b.Name, b.AddrsKey)
		}
		names[b.Name] = true
		if LookupBroker(b.Name) != b {
			t.Errorf("LookupBroker(%q) is not its entry", b.Name)
		}
	}
	if LookupBroker("kafka") != nil {
		t.Error("LookupBroker(kafka) found an entry")
	}
	if got := strings.Join(BrokerNames(), ","); got != "nsq,stomp,rocketmq" {
		t.Errorf("BrokerNames() = %s", got)
	}

	for _, tc := range []struct {
		name     string
		broker   *Broker
		set      func(*Sections)
		enabled  bool
		embedded int
	}{
		{"nsq embedded by default", NSQBroker, func(*Sections) {}, true, 3},
		{"nsq with hosts runs no embedded nsqd", NSQBroker, func(s *Sections) { s.NSQ.Hosts = []string{"a:1"} }, true, 0},
		{"stomp embedded by default", STOMPBroker, func(s *Sections) { s.STOMP.Embedded = 2 }, true, 2},
		{"stomp with hosts", STOMPBroker, func(s *Sections) { s.STOMP.Hosts = []string{"a:1"}; s.STOMP.Embedded = 2 }, true, 0},
		{"rocketmq disabled without name servers", RocketMQBroker, func(*Sections) {}, false, 0},
		{"rocketmq enabled by name servers", RocketMQBroker, func(s *Sections) { s.RocketMQ.NameServers = []string{"ns:9876"} }, true, 0},
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
		for _, b := range Brokers {
			_, err := b.Open(defaults(), nil, Common{}, log)
			if err == nil || !strings.HasPrefix(err.Error(), b.AddrsSetting()+": ") {
				t.Errorf("%s: Open(no addresses) = %v, want an error naming %s", b.Name, err, b.AddrsSetting())
			}
		}
	})
	t.Run("Validate prefixes errors with the broker's name", func(t *testing.T) {
		s := defaults()
		s.NSQ.Hosts, s.STOMP.Hosts, s.RocketMQ.NameServers = []string{"x"}, []string{"x"}, []string{"x"}
		for _, b := range Brokers {
			err := b.Validate(s, Common{})
			if err == nil || !strings.HasPrefix(err.Error(), b.Name+".") {
				t.Errorf("%s: Validate = %v", b.Name, err)
			}
		}
	})
}
