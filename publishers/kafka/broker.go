package kafka

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/publishers"
)

// Broker is Kafka's registry entry: it publishes to the cluster behind kafka.brokers. There is no
// embedded Kafka (franz-go's kfake is not served here), so it is enabled only by them.
var Broker = &publishers.Broker{
	Name:     Section,
	AddrsKey: AddrsKey,
	Batch:    "one Kafka produce request",
	Group:    "Kafka consumer group",
	// The integration tests read MQTARGET_KAFKA_TEST_BROKERS (not kafka.brokers' own
	// MQTARGET_KAFKA_BROKERS, which would turn Kafka on in every mqtarget the other tests start) and
	// KAFKA_* names that are not mqtarget's; internal/itest's HTTP suite reads
	// MQTARGET_KAFKA_TEST_HTTP_BROKERS and MQTARGET_KAFKA_TEST_HTTP_ENV (its own cluster, and the
	// KAFKA_* settings scripts/kafka.sh started it with).
	Env: []string{"KAFKA_TEST_BROKERS", "KAFKA_TEST_HTTP_BROKERS", "KAFKA_TEST_HTTP_ENV"},
	Hooks: publishers.Hooks{
		Default:  func() any { return DefaultConfig() },
		Addrs:    func(sec any) []string { return sec.(*Config).Brokers },
		Topic:    ValidateTopic,
		TLS:      func(sec any) publishers.TLSConfig { return sec.(*Config).TLSConfig },
		Validate: func(sec any, prefix string, c publishers.Common) error { return withCommon(sec, c).Validate(prefix) },
		Setup:    func(sec any) map[string]any { return sec.(*Config).Setup() },
		Open: func(sec any, addrs []string, c publishers.Common, log *slog.Logger) (publishers.Publisher, error) {
			k := withCommon(sec, c)
			k.Brokers = addrs
			return New(k, log)
		},
		Consume: func(sec any, addrs []string, o publishers.ConsumerOptions, log *slog.Logger) (publishers.Consumer, error) {
			k := *sec.(*Config)
			k.Brokers = addrs
			return NewConsumer(k, o, log)
		},
	},
}

// withCommon is the section with the settings it takes from outside it: publish_timeout bounds an
// asynchronous publish and a record's life in the client. A publish_timeout out of range is config's
// to report, once: the section keeps its default then.
func withCommon(sec any, c publishers.Common) Config {
	k := *sec.(*Config)
	if c.PublishTimeout > 0 && c.PublishTimeout <= publishers.MaxPublishTimeout {
		k.PublishTimeout = c.PublishTimeout
	}
	return k
}

// Broker returns the section's registry entry (how the broker list finds it).
func (Config) Broker() *publishers.Broker { return Broker }
