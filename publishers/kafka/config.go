package kafka

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/mqtarget/mqtarget/publishers"
)

// Section is the name of the configuration section, the prefix of every key (kafka.brokers, ...), and
// the broker's name; AddrsKey is the key, under it, of the addresses that enable it.
const (
	Section  = "kafka"
	AddrsKey = "brokers"
)

// Values of acks.
const (
	AcksAll    = "all"    // every in-sync replica wrote the record (Kafka's acks=all, -1)
	AcksLeader = "leader" // the partition leader wrote it (acks=1)
)

// SASL mechanisms of sasl_mechanism.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Bounds of the settings, beyond which a value is a mistake.
const (
	maxPartitions  = 1024
	maxReplication = 16
	maxClientID    = 255
)

// Config is the kafka section. Kafka is enabled when Brokers is non-empty.
type Config struct {
	// Brokers are bootstrap addresses; the publisher's hosts are the cluster's brokers as the cluster
	// names them (its metadata), in node-id order.
	Brokers []string `yaml:"brokers" help:"Kafka bootstrap broker addresses host:port, comma-separated; empty disables Kafka. Hosts are the cluster's brokers in node-id order"`
	// Acks: all (every in-sync replica) or leader.
	Acks string `yaml:"acks" help:"what a produce waits for: all (every in-sync replica) or leader"`
	// Partitions and ReplicationFactor are those of the topics mqtarget creates: max(partitions,
	// brokers) partitions, partition i led by the i-th broker.
	Partitions        int    `yaml:"partitions" help:"partitions of the topics mqtarget creates (at least one per broker: max(partitions, brokers))"`
	ReplicationFactor int    `yaml:"replication_factor" help:"replicas of each partition of the topics mqtarget creates (at most the number of brokers)"`
	ClientID          string `yaml:"client_id" help:"Kafka client.id of mqtarget's producer and consumers"`
	// SASL: the mechanism, the user and a file holding the password (its first line).
	SASLMechanism    string `yaml:"sasl_mechanism" help:"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)"`
	SASLUser         string `yaml:"sasl_user" help:"SASL user name (with sasl_mechanism)"`
	SASLPasswordFile string `yaml:"sasl_password_file" help:"file whose first line is the SASL password (with sasl_mechanism)"`
	// TLS to every broker.
	publishers.TLSConfig `yaml:",inline"`

	// PublishTimeout is the configuration's publish_timeout (not a key of this section; the registry
	// entry sets it): the bound of an asynchronous publish and of a record's life in the client.
	PublishTimeout time.Duration `yaml:"-"`
}

// DefaultConfig returns the Kafka defaults.
func DefaultConfig() Config {
	return Config{Acks: AcksAll, Partitions: 1, ReplicationFactor: 1, ClientID: "mqtarget", PublishTimeout: 5 * time.Second}
}

// Setup is what GET / shows of the section beside the hosts.
func (c Config) Setup() map[string]any {
	return map[string]any{
		"brokers": c.Brokers, "acks": c.Acks, "partitions": c.Partitions, "replication_factor": c.ReplicationFactor,
		"client_id": c.ClientID, "sasl_mechanism": c.SASLMechanism,
	}
}

// Validate checks c; errors name the key under prefix (e.g. "kafka").
func (c Config) Validate(prefix string) error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{prefix, key}, args...)...))
	}
	errs = append(errs, publishers.ValidateAddrs(prefix+".brokers", c.Brokers))
	if c.Acks != AcksAll && c.Acks != AcksLeader {
		add("acks", "must be %s or %s, got %q", AcksAll, AcksLeader, c.Acks)
	}
	if c.Partitions < 1 || c.Partitions > maxPartitions {
		add("partitions", "must be 1..%d, got %d", maxPartitions, c.Partitions)
	}
	if c.ReplicationFactor < 1 || c.ReplicationFactor > maxReplication {
		add("replication_factor", "must be 1..%d, got %d", maxReplication, c.ReplicationFactor)
	}
	if c.ClientID == "" || len(c.ClientID) > maxClientID || !clientIDChars.All(c.ClientID) {
		add("client_id", "%q must be 1..%d characters of [a-zA-Z0-9._-]", c.ClientID, maxClientID)
	}
	switch c.SASLMechanism {
	case "":
		if c.SASLUser != "" {
			add("sasl_user", "set without %s.sasl_mechanism", prefix)
		}
		if c.SASLPasswordFile != "" {
			add("sasl_password_file", "set without %s.sasl_mechanism", prefix)
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASLUser == "" {
			add("sasl_user", "required with %s.sasl_mechanism %s", prefix, c.SASLMechanism)
		}
		if c.SASLPasswordFile == "" {
			add("sasl_password_file", "required with %s.sasl_mechanism %s", prefix, c.SASLMechanism)
		}
	default:
		add("sasl_mechanism", "must be %s, %s or %s (or empty), got %q", SASLPlain, SASLScramSHA256, SASLScramSHA512, c.SASLMechanism)
	}
	if c.PublishTimeout <= 0 || c.PublishTimeout > publishers.MaxPublishTimeout {
		errs = append(errs, fmt.Errorf("publish_timeout: must be 1ns..%v, got %v", publishers.MaxPublishTimeout, c.PublishTimeout))
	}
	errs = append(errs, c.TLSConfig.Validate(prefix))
	return errors.Join(errs...)
}

// saslMechanism reads the password file and returns the configured mechanism; nil without SASL.
func (c Config) saslMechanism(prefix string) (sasl.Mechanism, error) {
	if c.SASLMechanism == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.SASLPasswordFile)
	if err != nil {
		return nil, fmt.Errorf("%s.sasl_password_file: %w", prefix, err)
	}
	pass, _, _ := strings.Cut(string(b), "\n")
	pass = strings.TrimSuffix(pass, "\r")
	if pass == "" {
		return nil, fmt.Errorf("%s.sasl_password_file: %s: the first line (the password) is empty", prefix, c.SASLPasswordFile)
	}
	switch c.SASLMechanism {
	case SASLPlain:
		return plain.Auth{User: c.SASLUser, Pass: pass}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: c.SASLUser, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: c.SASLUser, Pass: pass}.AsSha512Mechanism(), nil
	}
}

var (
	topicChars    = publishers.NewNameChars("._-")
	clientIDChars = topicChars
)

// maxTopicLen is Kafka's limit on topic names (Topic.MAX_NAME_LENGTH).
const maxTopicLen = 249

// ValidateTopic applies Kafka's topic rules (org.apache.kafka.common.internals.Topic): 1..249
// characters of [a-zA-Z0-9._-], not "." or "..", and not an internal topic (__consumer_offsets,
// __transaction_state and the other "__" names Kafka reserves).
func ValidateTopic(name string) error {
	if len(name) > maxTopicLen || !topicChars.All(name) || name == "." || name == ".." {
		return fmt.Errorf("%q is not a valid Kafka topic (1-249 of [a-zA-Z0-9._-], not . or ..)", name)
	}
	if strings.HasPrefix(name, "__") {
		return fmt.Errorf("%q: topics starting with __ are Kafka's internal ones", name)
	}
	return nil
}
