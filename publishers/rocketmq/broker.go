package rocketmq

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is RocketMQ's registry entry: it publishes to the cluster behind rocketmq.name_servers; there
// is no embedded RocketMQ, so it is enabled only by them. With rocketmq.create_topics the default topics
// are created at start.
var Broker = &publishers.Broker{
	Name:     "rocketmq",
	AddrsKey: "name_servers",
	Batch:    "RocketMQ batch",
	Group:    "RocketMQ consumer group",
	Env:      []string{"ROCKETMQ_NAMESRV", "ROCKETMQ_TLS_CA", "ROCKETMQ_ACL_"},
	Hooks: publishers.Hooks{
		Default:  func() any { return DefaultConfig() },
		Addrs:    func(sec any) []string { return sec.(*Config).NameServers },
		Topic:    ValidateTopic,
		TLS:      func(sec any) publishers.TLSConfig { return sec.(*Config).TLSConfig },
		Validate: func(sec any, prefix string, _ publishers.Common) error { return sec.(*Config).Validate(prefix) },
		Setup: func(sec any) map[string]any {
			s := sec.(*Config)
			return map[string]any{"name_servers": s.NameServers, "group": s.Group, "create_topics": s.CreateTopics}
		},
		Open: func(sec any, addrs []string, c publishers.Common, log *slog.Logger) (publishers.Publisher, error) {
			rc := *sec.(*Config)
			rc.NameServers = addrs
			var topics []string
			if rc.CreateTopics {
				for _, t := range c.Topics {
					if ValidateTopic(t) == nil { // otherwise requests name their topic
						topics = append(topics, t)
					}
				}
			}
			return New(rc, topics, log)
		},
		Consume: func(sec any, addrs []string, o publishers.ConsumerOptions, log *slog.Logger) (publishers.Consumer, error) {
			c := *sec.(*Config)
			c.NameServers = addrs
			return NewConsumer(c, o, log)
		},
	},
}

// Broker returns the section's registry entry (how the broker list finds it).
func (Config) Broker() *publishers.Broker { return Broker }

// New opens the publisher rocketmq.client chooses: Native (native) or the library path's Publisher.
func New(c Config, topics []string, log *slog.Logger) (publishers.Publisher, error) {
	if c.Client == ClientNative {
		p, err := NewNative(c, topics, log)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	p, err := NewLibrary(c, topics, log)
	if err != nil {
		return nil, err
	}
	return p, nil
}
