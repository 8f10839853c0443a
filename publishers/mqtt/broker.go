package mqtt

import (
	"errors"
	"log/slog"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is MQTT's registry entry: it publishes to mqtt.servers, or to embedded mochi-mqtt servers
// when there are none. Its integration test reads MQTARGET_MQTT_TEST_SERVERS (not mqtt.servers' own
// MQTARGET_MQTT_SERVERS, which would turn MQTT on in every mqtarget the other tests start).
var Broker = &publishers.Broker{
	Name:     "mqtt",
	AddrsKey: "servers",
	Batch:    "one PUBLISH per message, acknowledged together (MQTT has no batch)",
	Env:      []string{"MQTT_TEST_SERVERS", "MQTT_TEST_TLS_SERVER", "MQTT_TEST_TLS_CA"},
	Hooks: publishers.Hooks{
		Default:  func() any { return DefaultConfig() },
		Addrs:    func(sec any) []string { return sec.(*Config).Servers },
		Embedded: func(sec any) int { return sec.(*Config).Embedded },
		Topic:    ValidateTopic,
		TLS:      func(sec any) publishers.TLSConfig { return sec.(*Config).TLSConfig },
		Validate: func(sec any, prefix string, c publishers.Common) error {
			m := *sec.(*Config)
			dial := m.DialTimeout
			m.Embedded = publishers.EmbeddedCount(len(m.Servers), m.Embedded)
			err := m.Validate(prefix)
			err = errors.Join(err, publishers.CheckDialTimeout(prefix, dial, c))
			return err
		},
		// "version" on GET / is the broker's (embedded: mochi-mqtt's; mqtarget load's result reads it as
		// such): the protocol spoken is "mqtt_version".
		Setup: func(sec any) map[string]any {
			m := sec.(*Config)
			return map[string]any{"qos": m.QoS, "mqtt_version": m.Version}
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
		Embed: startEmbeddedEntry,
	},
}

// startEmbeddedEntry starts n in-process mochi-mqtt servers taking messages up to message.max_size.
func startEmbeddedEntry(_ any, n int, c publishers.Common, log *slog.Logger) (*publishers.Embedded, error) {
	e, err := StartEmbedded(n, EmbeddedOptions{MaxMessageSize: c.MaxMessageSize}, log)
	if err != nil {
		return nil, err
	}
	return &publishers.Embedded{
		Addrs: e.Addrs(),
		Setup: map[string]any{"version": e.Version()},
		Close: e.Close,
	}, nil
}

// Broker returns the section's registry entry (how the broker list finds it).
func (Config) Broker() *publishers.Broker { return Broker }
