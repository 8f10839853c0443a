package amqp

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mqtarget/mqtarget/publishers"
)

// Config is the amqp section.
type Config struct {
	// URLs are independent AMQP 0-9-1 servers, amqp://user:pass@host:port/vhost, in configured order:
	// host k of /sendNHost is URLs[k]. Their passwords are never printed (URLs redacts them).
	URLs URLs `yaml:"urls" help:"AMQP 0-9-1 servers amqp://user:pass@host:port/vhost, comma-separated (passwords never printed)"`
	// Exchange is where messages are published, with the topic as routing key; "" is the default
	// exchange, which routes to the queue named like the key.
	Exchange string `yaml:"exchange" help:"exchange published to, routing key = topic (empty: the default exchange, which delivers to queue = topic)"`
	// Durable declares durable queues and sends persistent messages (delivery mode 2).
	Durable bool `yaml:"durable" help:"declare durable queues and publish persistent messages"`
	// Confirm puts the publishing channel in confirm mode: 200 after the broker's basic.ack, 502 on a
	// basic.nack. Without it a publish answers once written, which acknowledges nothing.
	Confirm bool `yaml:"confirm" help:"publisher confirms: answer 200 after the broker's ack, 502 on a nack (false: after the write, no acknowledgement)"`
	// Mandatory asks the broker to return what no queue takes: 502 instead of a silent drop.
	Mandatory bool `yaml:"mandatory" help:"publish mandatory: a message no queue takes is returned and answered 502 (needs amqp.confirm)"`
	// Heartbeat is the AMQP heartbeat interval asked for; a broker silent for 1.5 of them is taken for
	// dead (the client library's rule).
	Heartbeat time.Duration `yaml:"heartbeat" help:"AMQP heartbeat interval asked for (a broker silent for 1.5 intervals is taken for dead)"`
	// ConnectionsPerHost is how many connections, each with its own publishing channel, writer and
	// confirm stream, mqtarget keeps to every server; requests take them in turn. 2 by default: with one,
	// N = 4 senders had a longer p99 than a floor of one channel per sender in 3 of 4 runs, with 2 or 4
	// in 2 of 4 (docs/benchmarks.md).
	ConnectionsPerHost int `yaml:"connections_per_host" help:"AMQP connections per server, each with its own publishing channel; requests take them in turn"`
	// DialTimeout bounds connecting, TLS and the AMQP handshake.
	DialTimeout time.Duration `yaml:"dial_timeout" help:"timeout for connecting to an AMQP server, TLS and the AMQP handshake included"`
	// TLS: amqps:// URLs, verified with the shared tls_* settings.
	publishers.TLSConfig `yaml:",inline"`
}

// DefaultConfig returns the amqp section's defaults: no servers (the broker is disabled until
// amqp.urls names some), the default exchange, durable queues, persistent messages, confirms and
// mandatory publishes.
func DefaultConfig() Config {
	return Config{
		Durable:            true,
		Confirm:            true,
		Mandatory:          true,
		Heartbeat:          10 * time.Second,
		ConnectionsPerHost: 2,
		DialTimeout:        2 * time.Second,
	}
}

// Bounds of the settings.
const (
	maxDialTimeout = time.Minute
	// maxConnectionsPerHost bounds the connections (and their goroutines) per server.
	maxConnectionsPerHost = 64
	// AMQP carries the heartbeat in whole seconds (16 bits); beyond 10 minutes it detects nothing.
	maxHeartbeat = 10 * time.Minute
	// MaxNameLen is the longest exchange, queue or routing key AMQP 0-9-1 carries (a short string).
	MaxNameLen = 255
)

// Validate checks c; errors name the key under prefix (e.g. "amqp.urls[1]: ...").
func (c Config) Validate(prefix string) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{prefix, field}, args...)...))
	}
	errs = append(errs, c.URLs.validate(prefix+".urls", c.TLSConfig.Enabled, prefix))
	if c.Exchange != "" {
		if err := checkName(c.Exchange); err != nil {
			add("exchange", "%v", err)
		}
	}
	if c.Mandatory && !c.Confirm {
		add("mandatory", "needs %s.confirm: true (a returned message is only told apart from a stored one by the confirm that follows it)", prefix)
	}
	if c.Heartbeat < time.Second || c.Heartbeat > maxHeartbeat || c.Heartbeat%time.Second != 0 {
		add("heartbeat", "must be a whole number of seconds 1s..%v (AMQP carries seconds), got %v", maxHeartbeat, c.Heartbeat)
	}
	if c.ConnectionsPerHost < 1 || c.ConnectionsPerHost > maxConnectionsPerHost {
		add("connections_per_host", "must be 1..%d, got %d", maxConnectionsPerHost, c.ConnectionsPerHost)
	}
	if c.DialTimeout <= 0 || c.DialTimeout > maxDialTimeout {
		add("dial_timeout", "must be 1ns..%v, got %v", maxDialTimeout, c.DialTimeout)
	}
	errs = append(errs, c.TLSConfig.Validate(prefix))
	return errors.Join(errs...)
}

// URLs are the amqp.urls setting. Printed (YAML, %v), every password shows as "redacted".
type URLs []string

// MarshalYAML implements yaml.Marshaler: -print-config and /config show the URLs redacted.
func (u URLs) MarshalYAML() (any, error) {
	out := make([]string, len(u))
	for i, s := range u {
		out[i] = redact(s)
	}
	return out, nil
}

// String redacts the passwords wherever the list is formatted.
func (u URLs) String() string {
	out, _ := u.MarshalYAML()
	return strings.Join(out.([]string), ",")
}

// redact is s with its password replaced, or a placeholder when s does not parse (it may hold one).
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL, redacted>"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	return u.String()
}

// server is one parsed URL: where to connect and as whom.
type server struct {
	addr     string // host:port dialled
	name     string // what Hosts shows: addr, with /vhost unless the vhost is "/"
	tls      bool
	user     string
	password string
	vhost    string
}

// parse reads one URL. Its errors never repeat the URL (it may hold a password).
func parse(s string) (server, error) {
	u, err := url.Parse(s)
	if err != nil {
		return server{}, errors.New("is not a URL (a user or password with reserved characters such as @ : / ? # must be percent-encoded)")
	}
	var srv server
	switch u.Scheme {
	case "amqp":
	case "amqps":
		srv.tls = true
	default:
		return server{}, fmt.Errorf("scheme %q: must be amqp:// or amqps://", u.Scheme)
	}
	switch {
	case u.Opaque != "":
		return server{}, errors.New("must be amqp://[user:pass@]host[:port][/vhost]")
	case u.RawQuery != "" || u.ForceQuery:
		return server{}, errors.New("takes no query parameters (heartbeat, TLS and timeouts are amqp.* settings)")
	case u.Fragment != "":
		return server{}, errors.New("takes no #fragment")
	case u.Host == "":
		return server{}, errors.New("has no host")
	}
	srv.addr = u.Host
	if u.Port() == "" {
		port := "5672"
		if srv.tls {
			port = "5671"
		}
		srv.addr = net.JoinHostPort(u.Hostname(), port)
	}
	if err := publishers.ValidateHostPort(srv.addr); err != nil {
		return server{}, err // it names host:port only
	}
	srv.user, srv.password = "guest", "guest" // RabbitMQ's, and the client library's, default
	if u.User != nil {
		srv.user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			srv.password = p
		}
	}
	if !utf8.ValidString(srv.user) || !utf8.ValidString(srv.password) {
		return server{}, errors.New("user and password must be UTF-8")
	}
	srv.vhost = "/"
	srv.name = srv.addr
	if raw := strings.TrimPrefix(u.EscapedPath(), "/"); raw != "" {
		if strings.Contains(raw, "/") {
			return server{}, errors.New("vhost: a / in the vhost name must be written %2F")
		}
		vhost, err := url.PathUnescape(raw)
		if err != nil || checkName(vhost) != nil {
			return server{}, fmt.Errorf("vhost %q: must be 1-%d bytes of UTF-8 without control characters", raw, MaxNameLen)
		}
		srv.vhost = vhost
		if vhost != "/" {
			srv.name = srv.addr + "/" + raw
		}
	}
	return srv, nil
}

// validate checks the list under key: at most publishers.MaxHosts URLs, each parsing, with the scheme
// the tls setting says, none naming the same server and vhost twice.
func (u URLs) validate(key string, tlsOn bool, prefix string) error {
	if len(u) > publishers.MaxHosts {
		return fmt.Errorf("%s: %d URLs, at most %d are allowed", key, len(u), publishers.MaxHosts)
	}
	var errs []error
	seen := make(map[string]int, len(u))
	for i, s := range u {
		srv, err := parse(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s[%d]: %w", key, i, err))
		case srv.tls != tlsOn && tlsOn:
			errs = append(errs, fmt.Errorf("%s[%d]: amqp:// with %s.tls: true (use amqps://)", key, i, prefix))
		case srv.tls != tlsOn:
			errs = append(errs, fmt.Errorf("%s[%d]: amqps:// needs %s.tls: true (the tls_* settings apply to every URL)", key, i, prefix))
		default:
			if j, dup := seen[srv.name]; dup {
				errs = append(errs, fmt.Errorf("%s[%d]: %s repeats %s[%d]", key, i, srv.name, key, j))
			} else {
				seen[srv.name] = i
			}
		}
	}
	return errors.Join(errs...)
}

// ValidateTopic accepts what is a queue name and routing key alike: 1-255 bytes of UTF-8 without
// control characters or whitespace at either end, not starting with "amq." (RabbitMQ reserves it and
// refuses such declarations with 403).
func ValidateTopic(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(name, "amq."):
		return fmt.Errorf("%q starts with \"amq.\", which the broker reserves", name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%q starts or ends with whitespace", name)
	}
	return nil
}

// checkName accepts an AMQP short string fit for a name: 1-255 bytes of UTF-8, no control characters.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("is %d bytes, at most %d are allowed", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return errors.New("is not valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s contains the control character %q", strconv.Quote(name), r)
		}
	}
	return nil
}
