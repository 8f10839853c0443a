// Package config holds mqtarget's one configuration struct, its defaults and its validation, and binds
// a YAML file, MQTARGET_* environment variables and command-line flags to it
// (precedence: flags > environment > file > defaults).
//
// Every setting has one key, its YAML path: "http.addr" is the YAML key addr under http, the flag
// -http.addr and the environment variable MQTARGET_HTTP_ADDR.
package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// Config is the whole configuration. The help tags are the flag usage texts.
type Config struct {
	HTTP             HTTP          `yaml:"http"`
	Broker           string        `yaml:"broker" help:"default broker for requests without ?broker= (the first of the broker list)"`
	Topic            string        `yaml:"topic" help:"default topic"`
	Topic2           string        `yaml:"topic2" help:"default second topic, for /send2Topic"`
	Message          Message       `yaml:"message"`
	PublishTimeout   time.Duration `yaml:"publish_timeout" help:"how long a request waits for the broker's acknowledgement before answering 504"`
	Async            Async         `yaml:"async"`
	ShutdownLameDuck time.Duration `yaml:"shutdown_lame_duck" help:"on SIGINT/SIGTERM, how long /readyz answers 503 and every answer closes its connection before the shutdown starts (0: no lame-duck phase)"`
	ShutdownGrace    time.Duration `yaml:"shutdown_grace" help:"on SIGINT/SIGTERM, how long to wait for in-flight requests and async publishes"`
	Topics           Topics        `yaml:"topics"`
	Log              Log           `yaml:"log"`
	PProf            PProf         `yaml:"pprof"`
	Readyz           Readyz        `yaml:"readyz"`
	GCPercent        int           `yaml:"gc_percent" help:"Go's GC target (as GOGC): the heap grows this many percent over the live heap before a collection; a GOGC environment variable wins (0: Go's default, 100)"`
	GCMemoryLimit    int64         `yaml:"gc_memory_limit" help:"Go's soft memory limit in bytes (as GOMEMLIMIT): near it the GC collects more often, whatever gc_percent says; a GOMEMLIMIT environment variable wins (0: none)"`
	EmbeddedBrokers  []string      `yaml:"embedded_brokers" help:"brokers besides the default broker that run embedded when their hosts are empty, comma-separated; others without hosts are not enabled"`
	Echo             Echo          `yaml:"echo"`

	// The brokers' sections, one per entry of the broker list (publishers/brokers), under its name.
	brokers.Sections `yaml:",inline"`
}

// HTTP configures the server and its limits.
type HTTP struct {
	Addr              string        `yaml:"addr" help:"HTTP listen address"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" help:"time a client has to send a request's line and headers"`
	ReadTimeout       time.Duration `yaml:"read_timeout" help:"time a client has to send a request's body, counted from the end of its headers; past it 408 and the connection is closed"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" help:"a keep-alive connection without a request for this long is closed"`
	WriteTimeout      time.Duration `yaml:"write_timeout" help:"time a client has to take its answer, counted from the end of its request headers (or of its body); a client that reads slower or not at all loses the connection (more than publish_timeout and readyz.timeout)"`
	MaxHeaderBytes    int           `yaml:"max_header_bytes" help:"largest request line plus headers in bytes; beyond it 431"`
	MaxConnections    int           `yaml:"max_connections" help:"open HTTP connections at once; past it a new connection takes the slot of the one idle longest, else waits in the listen backlog (0: no limit)"`
	MaxRequests       int           `yaml:"max_requests" help:"send requests being handled at once; beyond it 503 with Retry-After at once (0: no limit)"`
	AuthTokenFile     string        `yaml:"auth_token_file" help:"file holding a bearer token the send endpoints require (Authorization: Bearer <token>; else 401); read at load and at start (empty: no token)"`
	AdminAddr         string        `yaml:"admin_addr" help:"serve /healthz, /readyz and /metrics on this host:port instead of http.addr (empty: on http.addr)"`
	TLSCertFile       string        `yaml:"tls_cert_file" help:"PEM certificate (chain) to serve HTTPS with on http.addr and http.admin_addr, with http.tls_key_file; read at load and at start (empty: plain HTTP)"`
	TLSKeyFile        string        `yaml:"tls_key_file" help:"PEM private key of http.tls_cert_file"`
}

// Topics bounds the topics clients can make mqtarget publish to.
type Topics struct {
	MaxDistinct int `yaml:"max_distinct" help:"distinct topic names each broker may be sent to since start (?topic=, ?topic2=, ?topics= spreads); past it 429 (0: no limit)"`
}

// Message configures generated payloads.
type Message struct {
	Size    int `yaml:"size" help:"default payload size in bytes (?size=)"`
	MaxSize int `yaml:"max_size" help:"largest payload accepted, from ?size= or a POST body, in bytes"`
}

// Async configures /sendAsync and /sendAsyncWait.
type Async struct {
	MaxInFlight      int   `yaml:"max_in_flight" help:"async publishes awaiting the broker at once; beyond it requests get 429"`
	MaxInFlightBytes int64 `yaml:"max_in_flight_bytes" help:"bytes of messages of async publishes awaiting the broker at once; beyond it requests get 429 (0: no limit)"`
}

// PProf configures the profiling listener.
type PProf struct {
	Addr string `yaml:"addr" help:"serve net/http/pprof on this host:port, a listener of its own (empty: off)"`
}

// Readyz configures what /readyz checks.
type Readyz struct {
	Brokers []string      `yaml:"brokers" help:"brokers whose hosts must all answer for /readyz to answer 200, comma-separated; the others are reported only (empty: the default broker)"`
	Timeout time.Duration `yaml:"timeout" help:"how long /readyz waits for its pings, all sent at once; a host that has not answered by then is down"`
}

// Log configures the slog logger.
type Log struct {
	Level  string `yaml:"level" help:"debug, info, warn or error"`
	Format string `yaml:"format" help:"text or json"`
}

// Default returns the configuration with every default; it is the one place defaults are set.
func Default() Config {
	return Config{
		HTTP: HTTP{
			Addr:              ":8080",
			ReadHeaderTimeout: 10 * time.Second,
			// A 64 MiB body (the largest message.max_size) takes about 5 s at 100 Mbit/s; a client slower
			// than that is holding a connection, not load-testing.
			ReadTimeout: 10 * time.Second,
			IdleTimeout: 2 * time.Minute,
			// Above publish_timeout (5 s), so a slow broker's answer still reaches the client; short
			// enough that a client that never reads frees its connection and memory soon.
			WriteTimeout: 15 * time.Second,
			// A request line and headers are held (twice: net/http reads the line, then copies it) while
			// their request is served, by every connection at once; load generators send under 1 KiB, and
			// nginx and Apache refuse request lines over 8 KiB.
			MaxHeaderBytes: 16 << 10,
			// Bounds file descriptors and per-connection goroutines; above the wrk -c a single target is
			// usually driven with.
			MaxConnections: 10000,
			// Bounds the request bodies held at once: 1024 × message.max_size (1 MiB) = 1 GiB.
			MaxRequests: 1024,
		},
		Broker:         brokers.List[0].Name,
		Topic:          "mqtarget",
		Topic2:         "mqtarget2",
		Message:        Message{Size: 100, MaxSize: 1 << 20},
		PublishTimeout: 5 * time.Second,
		// The count alone let the message size decide the memory held: 10000 × 1 MiB.
		Async: Async{MaxInFlight: 10000, MaxInFlightBytes: 64 << 20},
		// Enough for every busy keep-alive connection to get one more answer with "Connection: close"
		// (a load generator sends continuously), short enough not to delay Ctrl-C noticeably.
		ShutdownLameDuck: 2 * time.Second,
		ShutdownGrace:    10 * time.Second,
		// mqtarget's live heap is a few MB, so at Go's default of 100 it collects about 17 times a second
		// under load; at 400 a quarter as often: about 7 % less CPU per /send1, measured side by side at
		// 50 and 200 connections, for a peak RSS of 43-64 MB instead of 33-41 (docs/benchmarks.md). 200
		// costs the CPU 400 does and holds 7-13 MB less, but its p99 was higher in most runs side by side
		// (fewer collections disturb fewer requests), and tails are what people read from mqtarget.
		GCPercent: 400,
		// Five times the live heap (gc_percent 400) let bursts of large messages leave GBs of garbage;
		// past 512 MiB the GC runs more often instead. Normal use stays far below (43-64 MB).
		GCMemoryLimit: 512 << 20,
		// A ?topics= sweep up to 1000 fits; a runaway loop of new names stops there instead of filling
		// the broker with topics.
		Topics: Topics{MaxDistinct: 1000},
		Log:    Log{Level: "info", Format: "text"},
		// Under the 1 s timeout probes usually have, so a hanging broker gives 503, not a probe timeout.
		Readyz:   Readyz{Timeout: 900 * time.Millisecond},
		Echo:     defaultEcho(),
		Sections: brokers.Default(),
	}
}

// Bounds of the settings outside the broker sections: beyond them a value is a mistake (a unit
// forgotten, a digit too many), not a choice, and would only fail later or exhaust something.
const (
	maxHeaderBytes    = 64 << 20
	maxWriteTimeout   = time.Hour // above the largest publish_timeout (5m) with room for slow answers
	maxCount          = 1_000_000 // connections, requests, async publishes at once
	maxDistinctTopics = 100_000
	maxGCPercent      = 100_000
	minMemoryLimit    = 64 << 20 // below it the GC would run all the time
	maxMemoryLimit    = 1 << 40
	maxLameDuck       = 5 * time.Minute
	maxGrace          = 10 * time.Minute
	maxEchoTopics     = 64 // each is a consumer per broker
)

// Validate checks every field; each error names its field by key.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	if err := validateListenAddr(c.HTTP.Addr); err != nil {
		add("http.addr", "%v", err)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"http.read_header_timeout", c.HTTP.ReadHeaderTimeout},
		{"http.read_timeout", c.HTTP.ReadTimeout},
		{"http.idle_timeout", c.HTTP.IdleTimeout},
	} {
		if d.v <= 0 {
			add(d.key, "must be positive, got %v", d.v)
		}
	}
	switch {
	case c.HTTP.WriteTimeout > maxWriteTimeout:
		add("http.write_timeout", "must be at most %v, got %v", maxWriteTimeout, c.HTTP.WriteTimeout)
	case c.PublishTimeout > publishers.MaxPublishTimeout: // publish_timeout's own error says it
	case c.HTTP.WriteTimeout <= c.PublishTimeout || c.HTTP.WriteTimeout <= c.Readyz.Timeout:
		// The deadline counts while the handler waits for the broker (or /readyz for its pings).
		add("http.write_timeout", "must be more than publish_timeout (%v) and readyz.timeout (%v), got %v",
			c.PublishTimeout, c.Readyz.Timeout, c.HTTP.WriteTimeout)
	}
	if c.HTTP.MaxHeaderBytes < 4096 || c.HTTP.MaxHeaderBytes > maxHeaderBytes {
		add("http.max_header_bytes", "must be 4096..%d, got %d", maxHeaderBytes, c.HTTP.MaxHeaderBytes)
	}
	if c.HTTP.MaxConnections < 0 || c.HTTP.MaxConnections > maxCount {
		add("http.max_connections", "must be 0..%d (0: no limit), got %d", maxCount, c.HTTP.MaxConnections)
	}
	if c.HTTP.MaxRequests < 0 || c.HTTP.MaxRequests > maxCount {
		add("http.max_requests", "must be 0..%d (0: no limit), got %d", maxCount, c.HTTP.MaxRequests)
	}
	if c.HTTP.AdminAddr != "" {
		if err := validateListenAddr(c.HTTP.AdminAddr); err != nil {
			add("http.admin_addr", "%v", err)
		} else if _, port, _ := net.SplitHostPort(c.HTTP.AdminAddr); port != "0" &&
			(c.HTTP.AdminAddr == c.HTTP.Addr || c.HTTP.AdminAddr == c.PProf.Addr) {
			add("http.admin_addr", "%q is http.addr or pprof.addr too; the admin routes need a listener of their own", c.HTTP.AdminAddr)
		}
	}
	if (c.HTTP.TLSCertFile == "") != (c.HTTP.TLSKeyFile == "") {
		add("http.tls_cert_file", "http.tls_cert_file and http.tls_key_file must be set together")
	}
	if c.Topics.MaxDistinct < 0 || c.Topics.MaxDistinct > maxDistinctTopics {
		add("topics.max_distinct", "must be 0..%d (0: no limit), got %d", maxDistinctTopics, c.Topics.MaxDistinct)
	}
	if c.PProf.Addr != "" {
		if err := validateListenAddr(c.PProf.Addr); err != nil {
			add("pprof.addr", "%v", err)
		} else if _, port, _ := net.SplitHostPort(c.PProf.Addr); c.PProf.Addr == c.HTTP.Addr && port != "0" {
			add("pprof.addr", "%q is http.addr too; pprof needs a listener of its own", c.PProf.Addr)
		}
	}
	const maxMaxSize = 64 << 20
	if c.Message.MaxSize < 1 || c.Message.MaxSize > maxMaxSize {
		add("message.max_size", "must be 1..%d, got %d", maxMaxSize, c.Message.MaxSize)
	}
	if c.Message.Size < 1 || c.Message.Size > c.Message.MaxSize {
		add("message.size", "must be 1..message.max_size (%d), got %d", c.Message.MaxSize, c.Message.Size)
	}
	if c.PublishTimeout < time.Millisecond || c.PublishTimeout > publishers.MaxPublishTimeout {
		add("publish_timeout", "must be 1ms..%v, got %v", publishers.MaxPublishTimeout, c.PublishTimeout)
	}
	if c.Async.MaxInFlight < 1 || c.Async.MaxInFlight > maxCount {
		add("async.max_in_flight", "must be 1..%d, got %d", maxCount, c.Async.MaxInFlight)
	}
	// At least one message of message.max_size must fit (checked once that setting is valid).
	if b := c.Async.MaxInFlightBytes; b != 0 && (b < 0 || b > maxMemoryLimit || (c.Message.MaxSize <= maxMaxSize && b < int64(c.Message.MaxSize))) {
		add("async.max_in_flight_bytes", "must be 0 (no limit) or message.max_size (%d)..%d (1 TiB), got %d", c.Message.MaxSize, int64(maxMemoryLimit), c.Async.MaxInFlightBytes)
	}
	if c.GCPercent < 0 || c.GCPercent > maxGCPercent {
		add("gc_percent", "must be 0..%d (0: Go's default), got %d", maxGCPercent, c.GCPercent)
	}
	if c.GCMemoryLimit != 0 && (c.GCMemoryLimit < minMemoryLimit || c.GCMemoryLimit > maxMemoryLimit) {
		add("gc_memory_limit", "must be 0 (none) or %d (64 MiB)..%d (1 TiB), got %d", minMemoryLimit, maxMemoryLimit, c.GCMemoryLimit)
	}
	if c.ShutdownLameDuck < 0 || c.ShutdownLameDuck > maxLameDuck {
		add("shutdown_lame_duck", "must be 0..%v, got %v", maxLameDuck, c.ShutdownLameDuck)
	}
	if c.ShutdownGrace < 0 || c.ShutdownGrace > maxGrace {
		add("shutdown_grace", "must be 0..%v, got %v", maxGrace, c.ShutdownGrace)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		add("log.format", "must be text or json, got %q", c.Log.Format)
	}
	if c.Readyz.Timeout <= 0 || c.Readyz.Timeout > 10*time.Second {
		add("readyz.timeout", "must be 1ms..10s, got %v", c.Readyz.Timeout)
	}
	errs = append(errs, c.Echo.validate(), c.validateBrokers())
	return errors.Join(errs...)
}

// InUse reports whether b runs in this configuration: its addresses are configured, or it runs
// embedded because it is the default broker or listed in embedded_brokers. Embedded servers nobody
// asked for would cost memory, ports and a temporary directory, and fail /readyz for nothing.
func (c Config) InUse(b *publishers.Broker) bool {
	s := &c.Sections
	if len(b.Addrs(s)) > 0 {
		return true
	}
	return b.Embedded(s) > 0 && (b.Name == c.Broker || slices.Contains(c.EmbeddedBrokers, b.Name))
}

// ReadyBrokers are the brokers /readyz requires: readyz.brokers, or the default broker.
func (c Config) ReadyBrokers() []string {
	if len(c.Readyz.Brokers) == 0 {
		return []string{c.Broker}
	}
	return c.Readyz.Brokers
}

// Common returns the settings outside the broker sections that brokers use.
func (c Config) Common() publishers.Common {
	return publishers.Common{
		Topics:         []string{c.Topic, c.Topic2},
		MaxMessageSize: c.Message.MaxSize,
		PublishTimeout: c.PublishTimeout,
	}
}

// validateBrokers checks, from the broker registry, every broker's section and that the broker setting
// names a broker this configuration enables.
func (c Config) validateBrokers() error {
	var errs []error
	for _, b := range brokers.List {
		com := c.Common()
		com.InUse = c.InUse(b)
		err := b.Validate(&c.Sections, com)
		errs = append(errs, err)
		if b.Name == c.Broker && err == nil && !b.Enabled(&c.Sections) {
			errs = append(errs, fmt.Errorf("%s: must be set: broker %q is not enabled by this configuration",
				b.AddrsSetting(), b.Name))
		}
	}
	if brokers.Lookup(c.Broker) == nil {
		errs = append(errs, fmt.Errorf("broker: unknown broker %q (known: %s)", c.Broker, strings.Join(brokers.Names(), ", ")))
	}
	seen := map[string]int{}
	for i, name := range c.EmbeddedBrokers {
		key := fmt.Sprintf("embedded_brokers[%d]", i)
		j, dup := seen[name]
		seen[name] = i
		switch b := brokers.Lookup(name); {
		case dup:
			errs = append(errs, fmt.Errorf("%s: %q repeats embedded_brokers[%d]", key, name, j))
		case b == nil:
			errs = append(errs, fmt.Errorf("%s: unknown broker %q (known: %s)", key, name, strings.Join(brokers.Names(), ", ")))
		case len(b.Addrs(&c.Sections)) == 0 && b.Embedded(&c.Sections) == 0:
			errs = append(errs, fmt.Errorf("%s: broker %q has no embedded mode, or its embedded count is 0, and %s is empty", key, name, b.AddrsSetting()))
		}
	}
	for i, name := range c.Readyz.Brokers {
		if b := brokers.Lookup(name); b == nil || !c.InUse(b) {
			errs = append(errs, fmt.Errorf("readyz.brokers[%d]: broker %q is not enabled by this configuration", i, name))
		}
	}
	return errors.Join(append(errs, c.validateTopics())...)
}

// validateTopics checks the topics the configuration names against the rules of every broker in use:
// a request without ?topic= sends to topic (and topic2) on whichever broker it names, and the echo runs
// on every broker. Checked here, so -print-config and the start both refuse them with the key.
func (c Config) validateTopics() error {
	var errs []error
	check := func(key, name string) bool {
		if name == "" {
			errs = append(errs, fmt.Errorf("%s: must not be empty", key))
			return false
		}
		ok := true
		for _, b := range brokers.List {
			if !c.InUse(b) {
				continue
			}
			if err := b.ValidateTopic(name); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w (broker %s is in use)", key, err, b.Name))
				ok = false
			}
		}
		return ok
	}
	check("topic", c.Topic)
	check("topic2", c.Topic2)
	if c.Echo.Enabled || c.Echo.RoundTrip {
		for i, t := range c.Echo.Topics {
			key := fmt.Sprintf("echo.topics[%d]", i)
			if check(key, t) && c.Echo.AckSuffix != "" { // else its ack topic's error says nothing new
				check(key+" + echo.ack_suffix", t+c.Echo.AckSuffix)
			}
		}
	}
	return errors.Join(errs...)
}

// AuthToken reads the bearer token from http.auth_token_file, trimmed of surrounding white space (a
// trailing newline is how editors and `echo` leave it); "" when the key is not set.
func (h HTTP) AuthToken(readFile func(name string) ([]byte, error)) (string, error) {
	if h.AuthTokenFile == "" {
		return "", nil
	}
	b, err := readFile(h.AuthTokenFile)
	if err != nil {
		return "", fmt.Errorf("http.auth_token_file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("http.auth_token_file: %s holds no token (empty after trimming white space)", h.AuthTokenFile)
	}
	if strings.ContainsFunc(tok, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		// A header value cannot carry it, so no client could ever send it.
		return "", fmt.Errorf("http.auth_token_file: %s: the token must be printable ASCII without spaces", h.AuthTokenFile)
	}
	return tok, nil
}

// ServerTLS loads http.tls_cert_file and http.tls_key_file into the HTTPS listeners' configuration; nil
// when they are not set (plain HTTP).
func (h HTTP) ServerTLS() (*tls.Config, error) {
	if h.TLSCertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(h.TLSCertFile, h.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("http.tls_cert_file: %w", err)
	}
	// HTTP/1.1 only: what load generators speak, and one protocol to measure.
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// validateListenAddr accepts host:port and :port with a numeric port.
func validateListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port or :port: %v", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has no port number 0..65535", addr)
	}
	return nil
}
