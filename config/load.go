package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// EnvPrefix starts every environment variable mqtarget reads.
const EnvPrefix = "MQTARGET_"

// Sources are the inputs Load reads; cmd passes the process's own, tests pass their own.
type Sources struct {
	Args      []string                          // command-line arguments, without the program name
	LookupEnv func(string) (string, bool)       // os.LookupEnv
	Environ   func() []string                   // os.Environ, to refuse unknown MQTARGET_* variables; nil: not checked
	ReadFile  func(name string) ([]byte, error) // os.ReadFile
	Output    io.Writer                         // where -h writes usage
}

// Options are command-line switches that are not configuration.
type Options struct {
	PrintConfig bool // print the effective configuration as YAML and exit
	Version     bool // print the version and exit
}

// setting is one leaf of Config, addressed by its key.
type setting struct {
	key   string
	help  string
	value reflect.Value // addressable field inside the Config being loaded
}

// Env returns the environment variable for a key: MQTARGET_ + upper case, dots as underscores.
func Env(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load builds the effective configuration: defaults, then the YAML file named by -config or
// MQTARGET_CONFIG, then MQTARGET_* variables, then flags. The result is validated.
func Load(src Sources) (Config, Options, error) {
	cfg := Default()
	var opts Options
	settings := settingsOf(&cfg)

	fs := flag.NewFlagSet("mqtarget", flag.ContinueOnError)
	if src.Output != nil {
		fs.SetOutput(src.Output)
	}
	configFile := fs.String("config", "", "YAML configuration file (env "+EnvPrefix+"CONFIG)")
	fs.BoolVar(&opts.PrintConfig, "print-config", false, "print the effective configuration as YAML and exit")
	fs.BoolVar(&opts.Version, "version", false, "print the version, VCS revision and Go version and exit")
	// Flags are recorded now and applied last, after the file and the environment.
	raw := map[string]string{}
	for _, s := range settings {
		def := formatValue(s.value)
		var v flag.Value = recorder{raw, s.key, def}
		if s.value.Kind() == reflect.Bool {
			v = boolRecorder{v.(recorder)} // -echo.enabled alone means true
		}
		fs.Var(v, s.key, fmt.Sprintf("%s (env %s)", s.help, Env(s.key)))
	}
	if err := fs.Parse(src.Args); err != nil {
		return cfg, opts, err
	}
	if fs.NArg() > 0 {
		return cfg, opts, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if opts.Version {
		return cfg, opts, nil // the configuration does not matter
	}

	lookup := src.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	file := *configFile
	if file == "" {
		file, _ = lookup(EnvPrefix + "CONFIG")
	}
	if file != "" {
		data, err := src.ReadFile(file)
		if err != nil {
			return cfg, opts, fmt.Errorf("config: %w", err)
		}
		if err := decodeYAML(data, &cfg); err != nil {
			return cfg, opts, fmt.Errorf("config %s: %w", file, err)
		}
	}

	errs := unknownEnv(src.Environ, settings)
	for _, s := range settings {
		if v, ok := lookup(Env(s.key)); ok {
			if err := setValue(s.value, v); err != nil {
				errs = append(errs, fmt.Errorf("%s (from %s): %w", s.key, Env(s.key), err))
			}
		}
	}
	fs.Visit(func(f *flag.Flag) {
		v, ok := raw[f.Name]
		if !ok {
			return
		}
		for _, s := range settings {
			if s.key == f.Name {
				if err := setValue(s.value, v); err != nil {
					errs = append(errs, fmt.Errorf("%s (from -%s): %w", s.key, s.key, err))
				}
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return cfg, opts, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, opts, err
	}
	return cfg, opts, cfg.checkFiles(src.ReadFile)
}

// checkFiles reads the files settings name (the bearer token, the HTTPS key pair, the brokers' TLS
// files), as the start will again, so -print-config and the start refuse a missing or malformed one
// alike, naming its key. readFile nil: the token is not checked.
func (c Config) checkFiles(readFile func(string) ([]byte, error)) error {
	var errs []error
	if readFile != nil {
		_, err := c.HTTP.AuthToken(readFile)
		errs = append(errs, err)
	}
	_, err := c.HTTP.ServerTLS()
	errs = append(errs, err)
	for _, b := range brokers.List {
		if c.InUse(b) {
			errs = append(errs, b.CheckFiles(&c.Sections))
		}
	}
	return errors.Join(errs...)
}

// ReservedEnv are MQTARGET_* variables that are not settings but that the repository's scripts and tests
// read (names ending in _ are prefixes); mqtarget ignores them, so a shell prepared for scripts/test.sh
// can still start it.
// The brokers' own (publishers.Broker.Env) come from the broker list.
var ReservedEnv = reservedEnv()

func reservedEnv() []string {
	var out []string
	for _, name := range []string{"CACHE", "DATA", "KEEP_RUN", "INTEGRATION", "TEST_MAIN", "TEST_PROXY_CHILD",
		"APT_LOCK_TIMEOUT", "BROKER_LOCK_TIMEOUT", "CHROMIUM", "PAGE_SCREENSHOT"} {
		out = append(out, EnvPrefix+name)
	}
	for _, name := range brokers.Env() {
		out = append(out, EnvPrefix+name)
	}
	return out
}

// unknownEnv returns an error for each MQTARGET_* variable that names no setting, so a typo such as
// MQTARGET_HTTP_ADR fails loudly instead of leaving the default in place.
func unknownEnv(environ func() []string, settings []setting) []error {
	if environ == nil {
		return nil
	}
	known := map[string]bool{EnvPrefix + "CONFIG": true}
	for _, s := range settings {
		known[Env(s.key)] = true
	}
	var errs []error
	for _, kv := range environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || known[name] || reserved(name) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s: unknown environment variable: no setting is named so (mqtarget -h lists each setting's variable)", name))
	}
	return errs
}

func reserved(name string) bool {
	for _, r := range ReservedEnv {
		if name == r || (strings.HasSuffix(r, "_") && strings.HasPrefix(name, r)) {
			return true
		}
	}
	return false
}

// decodeYAML overlays a YAML document onto cfg; unknown keys are errors so typos don't pass silently.
func decodeYAML(data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// YAML renders cfg as a YAML document, for -print-config.
func (c Config) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// Keys lists every setting's key with its help text, in declaration order (for docs and tests).
func Keys() [][2]string {
	cfg := Default()
	var out [][2]string
	for _, s := range settingsOf(&cfg) {
		out = append(out, [2]string{s.key, s.help})
	}
	return out
}

// settingsOf walks cfg's fields by their yaml tags.
func settingsOf(cfg *Config) []setting {
	var out []setting
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			fv := v.Field(i)
			if opts == "inline" {
				walk(fv, prefix) // its fields are keys at this level, as in YAML
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			key := prefix + name
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				walk(fv, key+".")
				continue
			}
			out = append(out, setting{key: key, help: f.Tag.Get("help"), value: fv})
		}
	}
	walk(reflect.ValueOf(cfg).Elem(), "")
	return out
}

var durationType = reflect.TypeOf(time.Duration(0))

// setValue parses s into v according to v's type. Lists are comma-separated; an empty string is an empty list.
func setValue(v reflect.Value, s string) error {
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 500ms or 5s)", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a boolean", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var list []string
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				list = append(list, part)
			}
		}
		v.Set(reflect.ValueOf(list))
	default:
		return fmt.Errorf("unsupported setting type %s", v.Type())
	}
	return nil
}

func formatValue(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	default:
		return fmt.Sprint(v.Interface())
	}
}

// recorder is a flag.Value that keeps the raw text for Load to apply after file and environment.
type recorder struct {
	raw      map[string]string
	key, def string
}

func (r recorder) String() string     { return r.def }
func (r recorder) Set(s string) error { r.raw[r.key] = s; return nil }

// boolRecorder is a recorder for bool settings, so the flag works without a value (-echo.enabled).
type boolRecorder struct{ recorder }

func (boolRecorder) IsBoolFlag() bool { return true }
