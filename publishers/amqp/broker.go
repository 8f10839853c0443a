package amqp

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is AMQP 0-9-1's registry entry: it publishes to amqp.urls; there is no embedded AMQP server,
// so it is enabled only by them.
var Broker = &publishers.Broker{
	Name:     "amqp",
	AddrsKey: "urls",
	Batch:    "AMQP publishes confirmed together",
	// Consumers of a queue share its messages; ConsumerOptions.Group names nothing. The integration
	// tests read MQTARGET_AMQP_TEST_URLS (not MQTARGET_AMQP_URLS, which would turn AMQP on in every
	// mqtarget the other tests start) and MQTARGET_AMQP_KILL.
	Env: []string{"AMQP_TEST_URLS", "AMQP_TEST_TLS_URL", "AMQP_TEST_TLS_CA", "AMQP_KILL"},
	Hooks: publishers.Hooks{
		Default: func() any { return DefaultConfig() },
		// The URLs hold passwords: Open needs them; what is shown is the publisher's Hosts.
		Addrs:    func(sec any) []string { return sec.(*Config).URLs },
		Topic:    ValidateTopic,
		TLS:      func(sec any) publishers.TLSConfig { return sec.(*Config).TLSConfig },
		Validate: func(sec any, prefix string, _ publishers.Common) error { return sec.(*Config).Validate(prefix) },
		Setup: func(sec any) map[string]any {
			s := sec.(*Config)
			return map[string]any{"exchange": s.Exchange, "durable": s.Durable, "confirm": s.Confirm, "mandatory": s.Mandatory}
		},
		Open: func(sec any, addrs []string, _ publishers.Common, log *slog.Logger) (publishers.Publisher, error) {
			c := *sec.(*Config)
			c.URLs = addrs
			return New(c, log)
		},
		Consume: func(sec any, addrs []string, o publishers.ConsumerOptions, log *slog.Logger) (publishers.Consumer, error) {
			c := *sec.(*Config)
			c.URLs = addrs
			return NewConsumer(c, o, log)
		},
	},
}

// Broker returns the section's registry entry (how the broker list finds it).
func (Config) Broker() *publishers.Broker { return Broker }
