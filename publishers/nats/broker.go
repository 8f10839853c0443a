package nats

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is NATS's registry entry: it publishes to nats.servers, or to embedded nats-servers when there
// are none.
var Broker = &publishers.Broker{
	Name:     "nats",
	AddrsKey: "servers",
	Batch:    "one JetStream atomic batch (one PubAck for all; each its PubAck on a stream without allow_atomic; core NATS: one flush)",
	Group:    "JetStream durable consumer (core NATS: queue group)",
	// The integration tests' variables (publishers/nats/integration_test.go), apart from nats.servers'
	// own MQTARGET_NATS_SERVERS, which would turn NATS on in every mqtarget the other tests start.
	Env: []string{"NATS_TEST_SERVERS", "NATS_MONITORS", "NATS_PIDFILES", "NATS_KILL_PIDFILE"},
	Hooks: publishers.Hooks{
		Default:  func() any { return DefaultConfig() },
		Addrs:    func(sec any) []string { return sec.(*Config).Servers },
		Embedded: func(sec any) int { return sec.(*Config).Embedded },
		Topic:    ValidateTopic,
		TLS:      func(sec any) publishers.TLSConfig { return sec.(*Config).TLSConfig },
		Validate: func(sec any, prefix string, c publishers.Common) error {
			n := *sec.(*Config)
			dial := n.DialTimeout
			n.Embedded = publishers.EmbeddedCount(len(n.Servers), n.Embedded)
			err := n.Validate(prefix)
			err = errors.Join(err, publishers.CheckDialTimeout(prefix, dial, c))
			if c.InUse && c.MaxMessageSize > maxEmbeddedPayload && len(n.Servers) == 0 {
				err = errors.Join(err, fmt.Errorf("%s.embedded: message.max_size %d exceeds the %d bytes an embedded nats-server takes", prefix, c.MaxMessageSize, maxEmbeddedPayload))
			}
			return err
		},
		Setup: func(sec any) map[string]any {
			c := sec.(*Config)
			return map[string]any{"jetstream": c.JetStream, "stream": c.Stream}
		},
		Open: func(sec any, addrs []string, _ publishers.Common, log *slog.Logger) (publishers.Publisher, error) {
			c := *sec.(*Config)
			c.Servers = addrs
			return New(c, log)
		},
		Consume: func(sec any, addrs []string, o publishers.ConsumerOptions, log *slog.Logger) (publishers.Consumer, error) {
			c := *sec.(*Config)
			c.Servers = addrs
			return NewConsumer(c, o, log)
		},
		Embed: startEmbedded,
	},
}

// startEmbedded starts n in-process nats-servers for the section, taking messages of message.max_size.
func startEmbedded(sec any, n int, c publishers.Common, log *slog.Logger) (*publishers.Embedded, error) {
	e, err := StartEmbedded(n, EmbeddedOptions{MaxStore: sec.(*Config).EmbeddedMaxStore, MaxPayload: EmbeddedPayload(c.MaxMessageSize)}, log)
	if err != nil {
		return nil, err
	}
	return &publishers.Embedded{Addrs: e.Addrs(), Setup: map[string]any{"version": e.Version()}, Close: e.Close}, nil
}

// Broker returns the section's registry entry (how the broker list finds it).
func (Config) Broker() *publishers.Broker { return Broker }
