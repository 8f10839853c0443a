package nsq

import (
	"errors"
	"log/slog"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is NSQ's registry entry: it publishes to nsq.hosts, or to embedded nsqd instances when there
// are none.
var Broker = &publishers.Broker{
	Name:     "nsq",
	AddrsKey: "hosts",
	Batch:    "NSQ MPUB",
	Group:    "NSQ channel",
	// Ephemeral on a real nsqd, so it drops the channel with its last consumer instead of keeping acks
	// for it forever. Durable on the embedded one, which ends with the process: an ephemeral channel has
	// no disk queue, and the embedded queues hold embedded_max_memory / message.max_size messages (64 by
	// default), so an ack consumer that many behind (a busy CPU) lost acks the round trip counted lost.
	AckGroup: func(group string, embedded bool) string {
		if embedded {
			return group
		}
		return group + "#ephemeral"
	},
	Env: []string{"NSQD_BIN"},
	Hooks: publishers.Hooks{
		Default:  func() any { return DefaultConfig() },
		Addrs:    func(sec any) []string { return sec.(*Config).Hosts },
		Embedded: func(sec any) int { return sec.(*Config).Embedded },
		Topic:    validateNSQTopic,
		TLS:      func(sec any) publishers.TLSConfig { return sec.(*Config).TLSConfig },
		Validate: func(sec any, prefix string, c publishers.Common) error {
			n := *sec.(*Config)
			dial := n.DialTimeout
			n.Embedded = publishers.EmbeddedCount(len(n.Hosts), n.Embedded)
			err := n.Validate(prefix)
			err = errors.Join(err, publishers.CheckDialTimeout(prefix, dial, c))
			return err
		},
		Open: func(sec any, addrs []string, _ publishers.Common, log *slog.Logger) (publishers.Publisher, error) {
			c := *sec.(*Config)
			c.Hosts = addrs
			return New(c, log)
		},
		Consume: func(sec any, addrs []string, o publishers.ConsumerOptions, log *slog.Logger) (publishers.Consumer, error) {
			c := *sec.(*Config)
			c.Hosts = addrs
			return NewConsumer(c, o, log)
		},
		Embed: startEmbedded,
	},
}

// startEmbedded starts n in-process nsqd instances for the section.
func startEmbedded(sec any, n int, c publishers.Common, log *slog.Logger) (*publishers.Embedded, error) {
	cfg := sec.(*Config)
	nsqd, err := StartNSQDWith(n, NSQDOptions{
		MaxMsgSize: int64(c.MaxMessageSize),
		MaxDisk:    cfg.EmbeddedMaxDisk,
		MaxMemory:  cfg.EmbeddedMaxMemory,
	}, log)
	if err != nil {
		return nil, err
	}
	return &publishers.Embedded{
		Addrs: nsqd.TCPAddrs(),
		Setup: map[string]any{"http": nsqd.HTTPAddrs(), "version": "nsqd " + publishers.ModuleVersion("github.com/nsqio/nsq")},
		Close: nsqd.Close,
	}, nil
}

// Broker returns the section's registry entry (how the broker list finds it).
func (Config) Broker() *publishers.Broker { return Broker }
