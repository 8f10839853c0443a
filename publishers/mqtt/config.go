package mqtt

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mqtarget/mqtarget/publishers"
)

// Config is the mqtt section.
type Config struct {
	// Servers are independent MQTT brokers (host:port), in order: host k of /send2Host and /send3Host is
	// Servers[k], one connection each. Empty means: start embedded mochi-mqtt servers.
	Servers []string `yaml:"servers" help:"MQTT broker addresses host:port, comma-separated, each an independent server (host k of /sendNHost); empty starts embedded mochi-mqtt servers"`
	// QoS of every PUBLISH: 1 answers after the PUBACK, 2 after the PUBCOMP, 0 after the write (no
	// acknowledgement at all).
	QoS int `yaml:"qos" help:"PUBLISH QoS: 1 (200 after PUBACK), 2 (200 after PUBCOMP), 0 (200 after the write: no acknowledgement)"`
	// Version is the MQTT protocol version spoken, by the publisher and the consumer alike: "5"
	// (paho.golang) or "3.1.1" (paho.mqtt.golang; no reason codes, no CONNACK limits: doc.go).
	Version string `yaml:"version" help:"MQTT protocol version: 5 (paho.golang) or 3.1.1 (paho.mqtt.golang: no reason codes, a refusal is a closed connection or not seen)"`
	// ClientID prefixes every connection's client identifier; a random part and the host index follow,
	// so that two connections never take each other's session.
	ClientID string `yaml:"client_id" help:"client identifier prefix (a random part and the host index follow)"`
	// User and PasswordFile are CONNECT's credentials; the file's first line is the password.
	User         string `yaml:"user" help:"MQTT user name in CONNECT (empty: none)"`
	PasswordFile string `yaml:"password_file" help:"file whose first line is the MQTT password (needs mqtt.user)"`
	// DialTimeout bounds connecting and the CONNECT/CONNACK exchange; a request's publish timeout bounds
	// the dial it waits for as well.
	DialTimeout time.Duration `yaml:"dial_timeout" help:"timeout for connecting to an MQTT broker, CONNECT/CONNACK included (publish_timeout bounds it too)"`
	// KeepAlive is CONNECT's keep alive: the client pings when idle, and a broker that answers no ping
	// within it loses the connection.
	KeepAlive time.Duration `yaml:"keepalive" help:"MQTT keep alive (whole seconds): an idle connection is pinged, and one whose broker answers nothing is dropped"`
	// MaxInFlight bounds the publishes in flight per server (QoS 1 and 2: PUBLISHes not yet
	// acknowledged); beyond it a sync publish waits (under its deadline) and an async one is refused.
	MaxInFlight int `yaml:"max_inflight" help:"publishes in flight per server; beyond it a sync publish waits and an async one is refused (503)"`
	// Embedded is the number of in-process mochi-mqtt servers started when Servers is empty.
	Embedded int `yaml:"embedded" help:"number of in-process mochi-mqtt servers started when mqtt.servers is empty"`
	// TLS: MQTT over TLS from the first byte, for publishing and consuming alike.
	publishers.TLSConfig `yaml:",inline"`
}

// DefaultConfig returns the mqtt defaults.
func DefaultConfig() Config {
	return Config{
		QoS:         1,
		Version:     "5",
		ClientID:    "mqtarget",
		DialTimeout: time.Second,
		KeepAlive:   10 * time.Second,
		MaxInFlight: 1024,
		Embedded:    3, // three, as the other embedded brokers: /send3Host needs them
	}
}

// Bounds of the settings beyond which a value is a mistake, not a choice.
const (
	maxDialTimeout  = time.Minute
	maxKeepAlive    = 18*time.Hour + 12*time.Minute + 15*time.Second // 65535 s, CONNECT's field
	maxInFlight     = 65535                                          // MQTT's packet identifiers
	maxClientIDLen  = 64                                             // the random part and index follow; brokers cap ids (mosquitto: 65535, MQTT 3.1: 23)
	maxEmbedded     = 16
	maxUserLen      = 1024
	maxPasswordSize = 64 << 10
)

// Validate checks c; errors name the key under prefix (e.g. "mqtt"). It reads no file: New reads the
// password file and the TLS files.
func (c Config) Validate(prefix string) error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{prefix, key}, args...)...))
	}
	errs = append(errs, publishers.ValidateAddrs(prefix+".servers", c.Servers))
	if c.QoS < 0 || c.QoS > 2 {
		add("qos", "must be 0, 1 or 2, got %d", c.QoS)
	}
	switch c.Version {
	case "5", version311:
	default:
		add("version", "must be 5 or 3.1.1, got %q", c.Version)
	}
	if err := checkText(c.ClientID, maxClientIDLen); err != nil {
		add("client_id", "%v", err)
	}
	if err := checkText(c.User, maxUserLen); err != nil {
		add("user", "%v", err)
	}
	if c.PasswordFile != "" && c.User == "" {
		add("password_file", "set without %s.user", prefix)
	}
	if c.DialTimeout <= 0 || c.DialTimeout > maxDialTimeout {
		add("dial_timeout", "must be 1ns..%v, got %v", maxDialTimeout, c.DialTimeout)
	}
	if c.KeepAlive < time.Second || c.KeepAlive > maxKeepAlive || c.KeepAlive%time.Second != 0 {
		add("keepalive", "must be a whole number of seconds 1s..%v (CONNECT carries seconds), got %v", maxKeepAlive, c.KeepAlive)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > maxInFlight {
		add("max_inflight", "must be 1..%d (MQTT's packet identifiers), got %d", maxInFlight, c.MaxInFlight)
	}
	if len(c.Servers) == 0 && (c.Embedded < 1 || c.Embedded > maxEmbedded) {
		add("embedded", "must be 1..%d when %s.servers is empty, got %d", maxEmbedded, prefix, c.Embedded)
	}
	if c.TLSConfig.Enabled && len(c.Servers) == 0 {
		add("tls", "needs %s.servers (embedded mochi-mqtt servers run without TLS)", prefix)
	}
	errs = append(errs, c.TLSConfig.Validate(prefix))
	return errors.Join(errs...)
}

// checkText accepts at most max bytes of UTF-8 without control characters: MQTT's UTF-8 strings must
// not hold U+0000, and a control character in a client id or user name is a typo, not a choice.
func checkText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%d bytes, at most %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	if i := strings.IndexFunc(s, isControl); i >= 0 {
		return fmt.Errorf("%q holds the control character %q", s, rune(s[i]))
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// MaxTopicLen is the longest topic accepted, in bytes. MQTT allows 65535; a longer one than this is a
// mistake in a load test, and every request carries it.
const MaxTopicLen = 1024

// ValidateTopic accepts an MQTT topic name a publish may use: 1..MaxTopicLen bytes of UTF-8, no
// wildcard ('+', '#': only subscriptions may hold them), no control character (U+0000 is forbidden by
// the protocol, the others discouraged), not starting with '$' (brokers reserve those: $SYS).
func ValidateTopic(name string) error {
	switch {
	case name == "":
		return errors.New("topic must not be empty")
	case len(name) > MaxTopicLen:
		return fmt.Errorf("topic is %d bytes, at most %d are allowed", len(name), MaxTopicLen)
	case !utf8.ValidString(name):
		return errors.New("topic is not valid UTF-8")
	case strings.HasPrefix(name, "$"):
		return fmt.Errorf("%q starts with '$': brokers reserve those topics ($SYS)", name)
	case strings.ContainsAny(name, "+#"):
		return fmt.Errorf("%q holds a wildcard ('+' or '#'), which only subscriptions may use", name)
	}
	if i := strings.IndexFunc(name, isControl); i >= 0 {
		return fmt.Errorf("%q holds the control character %q", name, rune(name[i]))
	}
	return nil
}
