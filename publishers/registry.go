package publishers

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// The broker registry: the one place that names the brokers. Config validation (config.Validate) and
// start-up (internal/serve) loop over Brokers. Adding a broker touches its own file (config section with
// Validate(prefix), defaults, constructor, consumer), a field in Sections and a line in DefaultSections,
// its entry below; an embedded mode also needs its server in internal/serve's embedders.

// Sections are the brokers' sections of the configuration, one field per registry entry. config.Config
// inlines it, so each section stays owned by its broker's file while config and the registry reach all
// of them through one type.
type Sections struct {
	NSQ      NSQConfig      `yaml:"nsq"`
	STOMP    STOMPConfig    `yaml:"stomp"`
	RocketMQ RocketMQConfig `yaml:"rocketmq"`
}

// DefaultSections returns every broker's defaults.
func DefaultSections() Sections {
	return Sections{NSQ: DefaultNSQConfig(), STOMP: DefaultSTOMPConfig(), RocketMQ: DefaultRocketMQConfig()}
}

// Common are the settings outside the broker sections that brokers use.
type Common struct {
	Topics         []string      // the default topics (topic, topic2)
	MaxMessageSize int           // message.max_size
	PublishTimeout time.Duration // publish_timeout
}

// Broker is one registry entry: everything config validation and start-up need to know about a broker
// family. Entries are values of this package, so the hooks can reach the broker's unexported parts.
type Broker struct {
	// Name is the broker's name in ?broker=, the broker setting, metrics labels and its section's key.
	Name string
	// AddrsKey is the setting, under Name, listing the addresses mqtarget connects to. When it is empty
	// the broker runs embedded (Embedded in-process servers) or, without an embedded mode, is disabled.
	AddrsKey string

	addrs    func(*Sections) []string
	embedded func(*Sections) int // nil: no embedded mode
	validate func(s *Sections, prefix string, c Common) error
	topic    func(name string) error // the broker's topic rules, as its publisher's ValidateTopic
	tls      func(*Sections) TLSConfig
	setup    func(*Sections) map[string]any // what / shows of the section, beside hosts
	open     func(s *Sections, addrs []string, c Common, log *slog.Logger) (Publisher, error)
	consume  func(s *Sections, addrs []string, o ConsumerOptions, log *slog.Logger) (Consumer, error) // nil: no consumer
}

// Brokers is the registry, in start order; the first is the default of the broker setting.
var Brokers = []*Broker{NSQBroker, STOMPBroker, RocketMQBroker}

// NSQBroker publishes to nsq.hosts, or to embedded nsqd instances when there are none.
var NSQBroker = &Broker{
	Name:     "nsq",
	AddrsKey: "hosts",
	addrs:    func(s *Sections) []string { return s.NSQ.Hosts },
	embedded: func(s *Sections) int { return s.NSQ.Embedded },
	topic:    validateNSQTopic,
	tls:      func(s *Sections) TLSConfig { return s.NSQ.TLSConfig },
	validate: func(s *Sections, prefix string, c Common) error {
		n := s.NSQ
		n.Embedded = embeddedCount(len(n.Hosts), n.Embedded)
		err := n.Validate(prefix)
		if c.PublishTimeout > 0 && s.NSQ.DialTimeout > c.PublishTimeout {
			err = errors.Join(err, fmt.Errorf("%s.dial_timeout: %v exceeds publish_timeout %v", prefix, s.NSQ.DialTimeout, c.PublishTimeout))
		}
		return err
	},
	open: func(s *Sections, addrs []string, _ Common, log *slog.Logger) (Publisher, error) {
		c := s.NSQ
		c.Hosts = addrs
		return NewNSQ(c, log)
	},
	consume: func(s *Sections, addrs []string, o ConsumerOptions, log *slog.Logger) (Consumer, error) {
		c := s.NSQ
		c.Hosts = addrs
		return NewNSQConsumer(c, o, log)
	},
}

// STOMPBroker publishes to stomp.hosts, or to embedded go-stomp servers when there are none.
var STOMPBroker = &Broker{
	Name:     "stomp",
	AddrsKey: "hosts",
	addrs:    func(s *Sections) []string { return s.STOMP.Hosts },
	embedded: func(s *Sections) int { return s.STOMP.Embedded },
	topic:    validateSTOMPTopic,
	tls:      func(s *Sections) TLSConfig { return s.STOMP.TLSConfig },
	validate: func(s *Sections, prefix string, _ Common) error {
		st := s.STOMP
		st.Embedded = embeddedCount(len(st.Hosts), st.Embedded)
		return st.Validate(prefix)
	},
	setup: func(s *Sections) map[string]any {
		return map[string]any{"prefix": s.STOMP.Prefix, "persistent": s.STOMP.Persistent}
	},
	open: func(s *Sections, addrs []string, _ Common, log *slog.Logger) (Publisher, error) {
		c := s.STOMP
		c.Hosts = addrs
		return NewSTOMP(c, log)
	},
	consume: func(s *Sections, addrs []string, _ ConsumerOptions, log *slog.Logger) (Consumer, error) {
		c := s.STOMP
		c.Hosts = addrs
		return NewSTOMPConsumer(c, log)
	},
}

// RocketMQBroker publishes to the cluster behind rocketmq.name_servers; there is no embedded RocketMQ,
// so it is enabled only by them. With rocketmq.create_topics the default topics are created at start.
var RocketMQBroker = &Broker{
	Name:     "rocketmq",
	AddrsKey: "name_servers",
	addrs:    func(s *Sections) []string { return s.RocketMQ.NameServers },
	topic:    ValidateRocketMQTopic,
	tls:      func(s *Sections) TLSConfig { return s.RocketMQ.TLSConfig },
	validate: func(s *Sections, prefix string, _ Common) error { return s.RocketMQ.Validate(prefix) },
	setup: func(s *Sections) map[string]any {
		return map[string]any{"name_servers": s.RocketMQ.NameServers, "group": s.RocketMQ.Group, "create_topics": s.RocketMQ.CreateTopics}
	},
	open: func(s *Sections, addrs []string, c Common, log *slog.Logger) (Publisher, error) {
		rc := s.RocketMQ
		rc.NameServers = addrs
		var topics []string
		if rc.CreateTopics {
			for _, t := range c.Topics {
				if ValidateRocketMQTopic(t) == nil { // otherwise requests name their topic
					topics = append(topics, t)
				}
			}
		}
		return NewRocketMQ(rc, topics, log)
	},
	consume: func(s *Sections, addrs []string, o ConsumerOptions, log *slog.Logger) (Consumer, error) {
		c := s.RocketMQ
		c.NameServers = addrs
		return NewRocketMQConsumer(c, o, log)
	},
}

// embeddedCount is the count a section's Validate should check: "embedded: 0" disables the embedded mode
// (the broker is then enabled only by its addresses), while the sections' own checks want 1..16 servers
// whenever the addresses are empty, so 0 is checked as 1.
func embeddedCount(hosts, embedded int) int {
	if hosts == 0 && embedded == 0 {
		return 1
	}
	return embedded
}

// LookupBroker returns the registry entry named name, or nil.
func LookupBroker(name string) *Broker {
	for _, b := range Brokers {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// BrokerNames lists the registry's names, in order.
func BrokerNames() []string {
	names := make([]string, len(Brokers))
	for i, b := range Brokers {
		names[i] = b.Name
	}
	return names
}

// AddrsSetting is the full key of the addresses setting, e.g. "rocketmq.name_servers".
func (b *Broker) AddrsSetting() string { return b.Name + "." + b.AddrsKey }

// Addrs returns the configured addresses; empty means embedded or disabled.
func (b *Broker) Addrs(s *Sections) []string { return b.addrs(s) }

// Embedded returns how many in-process servers to start: non-zero only when no addresses are configured
// and the broker has an embedded mode.
func (b *Broker) Embedded(s *Sections) int {
	if b.embedded == nil || len(b.addrs(s)) > 0 {
		return 0
	}
	return b.embedded(s)
}

// Enabled reports whether s enables the broker: addresses configured, or an embedded mode to fall back on.
func (b *Broker) Enabled(s *Sections) bool { return len(b.addrs(s)) > 0 || b.Embedded(s) > 0 }

// Validate checks the broker's section; errors name their field under the broker's name.
func (b *Broker) Validate(s *Sections, c Common) error { return b.validate(s, b.Name, c) }

// CheckFiles reads the files the broker's section names (its TLS CA and key pair), as opening the
// publisher will, so a missing or malformed one is refused with its key when the configuration loads.
func (b *Broker) CheckFiles(s *Sections) error {
	_, err := b.tls(s).Client(b.Name)
	return err
}

// ValidateTopic applies the broker's topic rules without a publisher, for names in the configuration.
func (b *Broker) ValidateTopic(name string) error { return b.topic(name) }

// Setup returns what GET / shows of the broker's configuration beside its hosts (nil when nothing).
func (b *Broker) Setup(s *Sections) map[string]any {
	if b.setup == nil {
		return nil
	}
	return b.setup(s)
}

// Open creates the broker's publisher for addrs: the configured addresses, or the embedded servers' when
// the broker runs embedded.
func (b *Broker) Open(s *Sections, addrs []string, c Common, log *slog.Logger) (Publisher, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: no addresses to publish to", b.AddrsSetting())
	}
	return b.open(s, addrs, c, log)
}
