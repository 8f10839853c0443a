package nats

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// Config is the nats section of the configuration.
type Config struct {
	// Servers are nats-server client addresses (host:port), each an independent server: host k of
	// /send2Host and /send3Host is Servers[k]. Empty means: start embedded servers.
	Servers []string `yaml:"servers" help:"nats-server client addresses host:port, comma-separated, each an independent server (host k of /sendNHost); empty starts embedded servers"`
	// JetStream publishes into JetStream streams and answers after the PubAck (the message is stored in
	// the stream); false publishes core NATS and answers after a flush round trip, which stores nothing.
	JetStream bool `yaml:"jetstream" help:"publish to JetStream and answer 200 after its PubAck (false: core NATS, 200 after a PING/PONG round trip, no storage acknowledgement)"`
	// Stream is the JetStream stream mqtarget publishes into: "" makes one stream per topic, named after
	// the topic (characters a stream name cannot hold replaced by _), subjects [topic]; a name makes one
	// stream of that name holding every topic, each added to its subjects on first use (nats-server
	// refuses subjects [">"], capturing everything, on a stream that acknowledges).
	Stream string `yaml:"stream" help:"JetStream stream: empty makes one stream per topic named after it; a name makes one stream of that name holding every topic (each added to its subjects on first use)"`
	// Embedded is the number of in-process nats-servers started when Servers is empty.
	Embedded int `yaml:"embedded" help:"number of in-process nats-servers (JetStream on) started when nats.servers is empty"`
	// EmbeddedMaxStore bounds the JetStream file store of each embedded server (in a temporary directory,
	// removed at exit); once full, publishes are refused (502).
	EmbeddedMaxStore int64 `yaml:"embedded_max_store" help:"bytes of JetStream file store each embedded nats-server may fill (a temporary directory); beyond it publishes are refused"`
	// DialTimeout bounds connecting to a server (TCP, TLS and the CONNECT/PONG handshake).
	DialTimeout time.Duration `yaml:"dial_timeout" help:"timeout for connecting to a nats-server (at most publish_timeout)"`
	// User and PasswordFile are the user/password the servers require (none when empty).
	User string `yaml:"user" help:"user name for the nats-servers (with nats.password_file)"`
	// PasswordFile holds the password (a trailing newline is dropped); it is read at start.
	PasswordFile string `yaml:"password_file" help:"file holding the password of nats.user (a trailing newline is dropped)"`
	// TLS: the client connections to the servers (nats.tls, nats.tls_ca_file, …).
	publishers.TLSConfig `yaml:",inline"`
}

// Bounds of the section.
const (
	maxEmbedded      = 16
	minEmbeddedStore = 1 << 20
	maxEmbeddedStore = 1 << 40
	maxDialTimeout   = time.Minute
	// maxStreamName: nats-server accepts longer names, but a stream name is a directory name in its
	// file store; 255 bytes is what file systems hold.
	maxStreamName = 255
	// maxTopic bounds a subject: nats-server's own limit is its max_payload, far beyond any topic.
	maxTopic = 255
)

// DefaultConfig returns the nats defaults: JetStream on, one stream per topic, 3 embedded servers of
// 1 GiB store each when no servers are configured.
func DefaultConfig() Config {
	return Config{JetStream: true, Embedded: 3, EmbeddedMaxStore: 1 << 30, DialTimeout: time.Second}
}

// Validate checks c; errors name the key under prefix (e.g. "nats").
func (c Config) Validate(prefix string) error {
	var errs []error
	errs = append(errs, publishers.ValidateAddrs(prefix+".servers", c.Servers))
	if c.DialTimeout <= 0 || c.DialTimeout > maxDialTimeout {
		errs = append(errs, fmt.Errorf("%s.dial_timeout: must be 1ns..%v, got %v", prefix, maxDialTimeout, c.DialTimeout))
	}
	if len(c.Servers) == 0 && (c.Embedded < 1 || c.Embedded > maxEmbedded) {
		errs = append(errs, fmt.Errorf("%s.embedded: must be 1..%d when %s.servers is empty, got %d", prefix, maxEmbedded, prefix, c.Embedded))
	}
	if len(c.Servers) == 0 && c.Embedded > 0 && (c.EmbeddedMaxStore < minEmbeddedStore || c.EmbeddedMaxStore > maxEmbeddedStore) {
		errs = append(errs, fmt.Errorf("%s.embedded_max_store: must be %d (1 MiB)..%d (1 TiB) when %s.servers is empty, got %d",
			prefix, int64(minEmbeddedStore), int64(maxEmbeddedStore), prefix, c.EmbeddedMaxStore))
	}
	if c.Stream != "" {
		if !c.JetStream {
			errs = append(errs, fmt.Errorf("%s.stream: set with %s.jetstream: false, which uses no stream", prefix, prefix))
		}
		if err := validateStreamName(c.Stream); err != nil {
			errs = append(errs, fmt.Errorf("%s.stream: %w", prefix, err))
		}
	}
	if (c.User == "") != (c.PasswordFile == "") {
		errs = append(errs, fmt.Errorf("%s.user: %s.user and %s.password_file must be set together", prefix, prefix, prefix))
	}
	if strings.ContainsAny(c.User, " \t\r\n\"") {
		errs = append(errs, fmt.Errorf("%s.user: %q holds a space, quote or control character", prefix, c.User))
	}
	if c.TLSConfig.Enabled && len(c.Servers) == 0 {
		errs = append(errs, fmt.Errorf("%s.tls: needs %s.servers (embedded nats-servers run without TLS)", prefix, prefix))
	}
	errs = append(errs, c.TLSConfig.Validate(prefix))
	return errors.Join(errs...)
}

// validateStreamName applies nats-server's rules for stream names: no whitespace, '.', '*', '>', path
// separators or control characters.
func validateStreamName(name string) error {
	if name == "" || len(name) > maxStreamName {
		return fmt.Errorf("%q: a stream name has 1..%d bytes", name, maxStreamName)
	}
	for i := 0; i < len(name); i++ {
		if !streamNameByte(name[i]) {
			return fmt.Errorf("%q is not a stream name (no spaces, control characters, '.', '*', '>', '/' or '\\')", name)
		}
	}
	return nil
}

func streamNameByte(b byte) bool {
	return b > ' ' && b != 0x7f && !strings.ContainsRune(".*>/\\", rune(b))
}

// StreamName is the stream a topic's messages go to when nats.stream is empty: the topic with every
// byte a stream name cannot hold replaced by '_' ("orders.eu" → "orders_eu").
func StreamName(topic string) string {
	b := []byte(topic)
	for i := range b {
		if !streamNameByte(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

// ValidateTopic applies the subject rules mqtarget publishes under: 1..255 bytes of printable ASCII
// without spaces, tokens separated by '.' (none empty), and no wildcards ('*', '>'), which a publish
// subject cannot hold.
func ValidateTopic(name string) error {
	if name == "" || len(name) > maxTopic {
		return fmt.Errorf("%q is not a valid NATS subject (1..%d bytes)", name, maxTopic)
	}
	if name[0] == '$' || strings.HasPrefix(name, "_INBOX.") {
		// $JS.API.… and $SYS.… are the server's API (a publish there could delete a stream), _INBOX.…
		// are reply subjects: none of them is a topic.
		return fmt.Errorf("%q is not a topic: subjects starting with '$' or _INBOX. are the server's API and replies", name)
	}
	for tok := range strings.SplitSeq(name, ".") { // no allocation: it runs on every publish
		if tok == "" {
			return fmt.Errorf("%q is not a valid NATS subject (an empty token between dots)", name)
		}
		for i := 0; i < len(tok); i++ {
			if b := tok[i]; b <= ' ' || b >= 0x7f || b == '*' || b == '>' {
				return fmt.Errorf("%q is not a valid NATS subject (printable ASCII without spaces; no '*' or '>' wildcards)", name)
			}
		}
	}
	return nil
}
