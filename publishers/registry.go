package publishers

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// The broker registry's entry type. A broker package (publishers/<broker>) exports one Broker value; the
// broker list (publishers/brokers) names each broker package once, and config, start-up, GET /, the
// help texts and the tests loop over that list. Nothing outside a broker's package names the broker.

// Common are the settings outside the broker sections that brokers use.
type Common struct {
	Topics         []string      // the default topics (topic, topic2)
	MaxMessageSize int           // message.max_size
	PublishTimeout time.Duration // publish_timeout
	// InUse: the configuration runs the broker (Validate only). A section's own checks apply always,
	// so a typo in an unused section is still refused; checks against settings outside it (a dial
	// timeout against publish_timeout, an embedded server's limits against message.max_size) only
	// when it runs: a new broker's defaults must not fail configurations that do not use it.
	InUse bool
}

// SectionSet gives each broker's configuration section by the broker's name: a pointer to the broker's
// own section type (e.g. *<broker>.Config), nil for a name it does not hold. config's sections
// (publishers/brokers.Sections) implement it.
type SectionSet interface {
	Section(name string) any
}

// Hooks are what a broker package supplies. Every sec argument is the broker's own section, as
// SectionSet.Section returns it; the hooks assert it to their type.
type Hooks struct {
	Default  func() any                                   // the section's defaults, a value of its type
	Addrs    func(sec any) []string                       // the configured addresses; empty: embedded or disabled
	Embedded func(sec any) int                            // in-process servers to start without addresses; nil: no embedded mode
	Validate func(sec any, prefix string, c Common) error // errors name their key under prefix
	Topic    func(name string) error                      // the topic rules, as the publisher's ValidateTopic
	TLS      func(sec any) TLSConfig                      // the section's TLS settings
	Setup    func(sec any) map[string]any                 // what GET / shows beside hosts; nil: nothing
	Open     func(sec any, addrs []string, c Common, log *slog.Logger) (Publisher, error)
	Consume  func(sec any, addrs []string, o ConsumerOptions, log *slog.Logger) (Consumer, error) // nil: no consumer
	Embed    func(sec any, n int, c Common, log *slog.Logger) (*Embedded, error)                  // nil: no embedded mode
}

// Embedded are a broker's running in-process servers.
type Embedded struct {
	Addrs []string       // what the publisher connects to
	Setup map[string]any // what GET / shows of them (their version, other listeners)
	Close func() error   // stops them; idempotent
}

// Broker is one registry entry: everything config, start-up, the help texts and the tests need to know
// about a broker family.
type Broker struct {
	// Name is the broker's name in ?broker=, the broker setting, metrics labels and its section's key.
	Name string
	// AddrsKey is the setting, under Name, listing the addresses mqtarget connects to. When it is empty
	// the broker runs embedded (Hooks.Embed) or, without an embedded mode, is disabled.
	AddrsKey string
	// Batch says how /send2 sends its two messages as one unit on this broker (for the endpoint list).
	Batch string
	// Group says what ConsumerOptions.Group names on this broker ("": the broker does not use it).
	Group string
	// AckGroup is the consumer group a round-trip process reads its acks with, from its own group and
	// whether the broker runs embedded (in the consumer's own process, so it lives no longer); nil: the
	// group itself.
	AckGroup func(group string, embedded bool) string
	// Env are the MQTARGET_* variables (without the prefix; a trailing _ is a prefix) that the broker's
	// scripts and tests read, which mqtarget must not take for unknown settings.
	Env []string
	// Hooks are the broker's functions.
	Hooks Hooks
}

// CheckDialTimeout is the check every section with a dial timeout makes against publish_timeout when
// the broker is in use: a dial longer than the publish would fail every request waiting for it.
func CheckDialTimeout(prefix string, dial time.Duration, c Common) error {
	if c.InUse && c.PublishTimeout > 0 && dial > c.PublishTimeout {
		return fmt.Errorf("%s.dial_timeout: %v exceeds publish_timeout %v", prefix, dial, c.PublishTimeout)
	}
	return nil
}

// EmbeddedCount is the count a section's Validate should check: "embedded: 0" disables the embedded
// mode (the broker is then enabled only by its addresses), while the sections' own checks want 1..16
// servers whenever the addresses are empty, so 0 is checked as 1.
func EmbeddedCount(hosts, embedded int) int {
	if hosts == 0 && embedded == 0 {
		return 1
	}
	return embedded
}

// AddrsSetting is the full key of the addresses setting, e.g. "b.name_servers".
func (b *Broker) AddrsSetting() string { return b.Name + "." + b.AddrsKey }

func (b *Broker) section(s SectionSet) any {
	sec := s.Section(b.Name)
	if sec == nil {
		panic(fmt.Sprintf("publishers: the sections hold no %q section", b.Name)) // a wiring mistake
	}
	return sec
}

// Addrs returns the configured addresses; empty means embedded or disabled.
func (b *Broker) Addrs(s SectionSet) []string { return b.Hooks.Addrs(b.section(s)) }

// Embedded returns how many in-process servers to start: non-zero only when no addresses are configured
// and the broker has an embedded mode.
func (b *Broker) Embedded(s SectionSet) int {
	if b.Hooks.Embedded == nil || b.Hooks.Embed == nil || len(b.Addrs(s)) > 0 {
		return 0
	}
	return b.Hooks.Embedded(b.section(s))
}

// Enabled reports whether s enables the broker: addresses configured, or an embedded mode to fall back on.
func (b *Broker) Enabled(s SectionSet) bool { return len(b.Addrs(s)) > 0 || b.Embedded(s) > 0 }

// Validate checks the broker's section; errors name their field under the broker's name.
func (b *Broker) Validate(s SectionSet, c Common) error {
	return b.Hooks.Validate(b.section(s), b.Name, c)
}

// CheckFiles reads the files the broker's section names (its TLS CA and key pair), as opening the
// publisher will, so a missing or malformed one is refused with its key when the configuration loads.
func (b *Broker) CheckFiles(s SectionSet) error {
	_, err := b.Hooks.TLS(b.section(s)).Client(b.Name)
	return err
}

// ValidateTopic applies the broker's topic rules without a publisher, for names in the configuration.
func (b *Broker) ValidateTopic(name string) error { return b.Hooks.Topic(name) }

// Setup returns what GET / shows of the broker's configuration beside its hosts (nil when nothing).
func (b *Broker) Setup(s SectionSet) map[string]any {
	if b.Hooks.Setup == nil {
		return nil
	}
	return b.Hooks.Setup(b.section(s))
}

// Open creates the broker's publisher for addrs: the configured addresses, or the embedded servers' when
// the broker runs embedded.
func (b *Broker) Open(s SectionSet, addrs []string, c Common, log *slog.Logger) (Publisher, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: no addresses to publish to", b.AddrsSetting())
	}
	return b.Hooks.Open(b.section(s), addrs, c, log)
}

// StartEmbedded starts n in-process servers of the broker.
func (b *Broker) StartEmbedded(s SectionSet, n int, c Common, log *slog.Logger) (*Embedded, error) {
	if b.Hooks.Embed == nil {
		return nil, fmt.Errorf("%s: empty, and mqtarget has no embedded %s server", b.AddrsSetting(), b.Name)
	}
	return b.Hooks.Embed(b.section(s), n, c, log)
}

// AckGroupOf is the round-trip ack group for group on this broker, configured by s.
func (b *Broker) AckGroupOf(s SectionSet, group string) string {
	if b.AckGroup == nil {
		return group
	}
	return b.AckGroup(group, b.Embedded(s) > 0)
}

// ModuleVersion is the version of module path linked into this binary ("" when unknown): the version
// of an embedded broker, which GET / shows so that load results can say which broker they measured.
func ModuleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return ""
}
