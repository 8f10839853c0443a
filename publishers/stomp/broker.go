package stomp

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is STOMP's registry entry: it publishes to stomp.hosts, or to embedded go-stomp servers when
// there are none.
var Broker = &publishers.Broker{
	Name:     "stomp",
	AddrsKey: "hosts",
	Batch:    "STOMP transaction",
	Env:      []string{"ARTEMIS_", "ACTIVEMQ_", "RABBITMQ_"},
	Hooks: publishers.Hooks{
		Default:  func() any { return DefaultConfig() },
		Addrs:    func(sec any) []string { return sec.(*Config).Hosts },
		Embedded: func(sec any) int { return sec.(*Config).Embedded },
		Topic:    validateSTOMPTopic,
		TLS:      func(sec any) publishers.TLSConfig { return sec.(*Config).TLSConfig },
		Validate: func(sec any, prefix string, _ publishers.Common) error {
			st := *sec.(*Config)
			st.Embedded = publishers.EmbeddedCount(len(st.Hosts), st.Embedded)
			return st.Validate(prefix)
		},
		Setup: func(sec any) map[string]any {
			s := sec.(*Config)
			return map[string]any{"prefix": s.Prefix, "persistent": s.Persistent}
		},
		Open: func(sec any, addrs []string, _ publishers.Common, log *slog.Logger) (publishers.Publisher, error) {
			c := *sec.(*Config)
			c.Hosts = addrs
			return New(c, log)
		},
		Consume: func(sec any, addrs []string, _ publishers.ConsumerOptions, log *slog.Logger) (publishers.Consumer, error) {
			c := *sec.(*Config)
			c.Hosts = addrs
			return NewConsumer(c, log)
		},
		Embed: startEmbedded,
	},
}

// startEmbedded starts n in-process go-stomp servers for the section.
func startEmbedded(sec any, n int, _ publishers.Common, log *slog.Logger) (*publishers.Embedded, error) {
	srv, err := StartServer(n, sec.(*Config).EmbeddedMaxBytes, log)
	if err != nil {
		return nil, err
	}
	return &publishers.Embedded{
		Addrs: srv.Addrs(),
		Setup: map[string]any{"version": "go-stomp server " + publishers.ModuleVersion("github.com/go-stomp/stomp/v3")},
		Close: srv.Close,
	}, nil
}

// Broker returns the section's registry entry (how the broker list finds it).
func (Config) Broker() *publishers.Broker { return Broker }
