package config_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers"
)

// sources builds in-memory Sources: no real environment, no real files.
type sources struct {
	args  []string
	env   map[string]string
	files map[string]string
}

func (s sources) load(t *testing.T) (config.Config, config.Options, error) {
	t.Helper()
	return config.Load(config.Sources{
		Args: s.args,
		LookupEnv: func(k string) (string, bool) {
			v, ok := s.env[k]
			return v, ok
		},
		Environ: func() []string {
			var env []string
			for k, v := range s.env {
				env = append(env, k+"="+v)
			}
			return env
		},
		ReadFile: func(name string) ([]byte, error) {
			data, ok := s.files[name]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			return []byte(data), nil
		},
		Output: io.Discard,
	})
}

// normalize treats a nil and an empty host list alike (a YAML "hosts: []" decodes to an empty slice).
func normalize(c config.Config) config.Config {
	nilEmpty(reflect.ValueOf(&c).Elem())
	return c
}

// nilEmpty sets every empty slice under v to nil, so that YAML's [] and a default's nil compare equal.
func nilEmpty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				nilEmpty(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Len() == 0 && v.CanSet() {
			v.Set(reflect.Zero(v.Type()))
		}
	}
}

func TestDefaultValidates(t *testing.T) {
	if err := config.Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestKeysHaveHelp(t *testing.T) {
	keys := config.Keys()
	seen := map[string]bool{}
	for _, kv := range keys {
		key, help := kv[0], kv[1]
		if strings.TrimSpace(help) == "" {
			t.Errorf("key %q has no help text", key)
		}
		if seen[key] {
			t.Errorf("key %q listed twice", key)
		}
		seen[key] = true
	}
	for _, want := range []string{
		"http.addr", "broker", "topic", "topic2", "message.size", "message.max_size", "publish_timeout",
		"async.max_in_flight", "shutdown_grace", "log.level", "log.format",
		"http.read_header_timeout", "http.read_timeout", "http.idle_timeout", "http.max_header_bytes",
		"http.max_connections", "http.max_requests", "shutdown_lame_duck",
		"nsq.hosts", "nsq.producers_per_host", "nsq.dial_timeout", "nsq.embedded",
	} {
		if !seen[want] {
			t.Errorf("Keys() lacks %q (got %v)", want, keys)
		}
	}
}

func TestEnv(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"http.addr", "MQTARGET_HTTP_ADDR"},
		{"broker", "MQTARGET_BROKER"},
		{"nsq.hosts", "MQTARGET_NSQ_HOSTS"},
		{"nsq.producers_per_host", "MQTARGET_NSQ_PRODUCERS_PER_HOST"},
		{"message.max_size", "MQTARGET_MESSAGE_MAX_SIZE"},
		{"publish_timeout", "MQTARGET_PUBLISH_TIMEOUT"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got := config.Env(tc.key); got != tc.want {
				t.Errorf("Env(%q) = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

const fullFile = `
http:
  addr: ":9000"
broker: nsq
topic: filetopic
nsq:
  hosts: [a:1, b:2]
  producers_per_host: 4
  dial_timeout: 250ms
message:
  size: 50
  max_size: 2048
async:
  max_in_flight: 7
publish_timeout: 3s
log:
  level: debug
`

// fromFullFile is the configuration fullFile describes.
func fromFullFile(c *config.Config) {
	c.HTTP.Addr = ":9000"
	c.Topic = "filetopic"
	c.NSQ.Hosts = []string{"a:1", "b:2"}
	c.NSQ.ProducersPerHost = 4
	c.NSQ.DialTimeout = 250 * time.Millisecond
	c.Message.Size = 50
	c.Message.MaxSize = 2048
	c.Async.MaxInFlight = 7
	c.PublishTimeout = 3 * time.Second
	c.Log.Level = "debug"
}

func TestLoadPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  sources
		want func(*config.Config) // applied to Default()
	}{
		{
			name: "defaults only",
			want: func(*config.Config) {},
		},
		{
			name: "empty file",
			src:  sources{args: []string{"-config", "c.yaml"}, files: map[string]string{"c.yaml": ""}},
			want: func(*config.Config) {},
		},
		{
			name: "file from -config",
			src:  sources{args: []string{"-config", "c.yaml"}, files: map[string]string{"c.yaml": fullFile}},
			want: fromFullFile,
		},
		{
			name: "file from -config=",
			src:  sources{args: []string{"-config=c.yaml"}, files: map[string]string{"c.yaml": fullFile}},
			want: fromFullFile,
		},
		{
			name: "file from MQTARGET_CONFIG",
			src: sources{env: map[string]string{"MQTARGET_CONFIG": "env.yaml"},
				files: map[string]string{"env.yaml": fullFile}},
			want: fromFullFile,
		},
		{
			name: "-config wins over MQTARGET_CONFIG",
			src: sources{args: []string{"-config", "flag.yaml"}, env: map[string]string{"MQTARGET_CONFIG": "env.yaml"},
				files: map[string]string{"flag.yaml": "topic: fromflagfile\n", "env.yaml": "topic: fromenvfile\n"}},
			want: func(c *config.Config) { c.Topic = "fromflagfile" },
		},
		{
			name: "env over file, file values kept otherwise",
			src: sources{args: []string{"-config", "c.yaml"}, files: map[string]string{"c.yaml": fullFile},
				env: map[string]string{"MQTARGET_HTTP_ADDR": ":9001", "MQTARGET_NSQ_HOSTS": "c:3", "MQTARGET_ASYNC_MAX_IN_FLIGHT": "9"}},
			want: func(c *config.Config) {
				fromFullFile(c)
				c.HTTP.Addr = ":9001"
				c.NSQ.Hosts = []string{"c:3"}
				c.Async.MaxInFlight = 9
			},
		},
		{
			name: "flags over env over file",
			src: sources{
				args:  []string{"-config", "c.yaml", "-http.addr", ":9002", "-nsq.hosts", "d:4,e:5", "-message.max_size", "4096", "-publish_timeout", "1500ms"},
				files: map[string]string{"c.yaml": fullFile},
				env:   map[string]string{"MQTARGET_HTTP_ADDR": ":9001", "MQTARGET_NSQ_HOSTS": "c:3", "MQTARGET_MESSAGE_MAX_SIZE": "3000", "MQTARGET_PUBLISH_TIMEOUT": "2s"},
			},
			want: func(c *config.Config) {
				fromFullFile(c)
				c.HTTP.Addr = ":9002"
				c.NSQ.Hosts = []string{"d:4", "e:5"}
				c.Message.MaxSize = 4096
				c.PublishTimeout = 1500 * time.Millisecond
			},
		},
		{
			name: "a flag equal to the default still overrides file and env",
			src: sources{args: []string{"-config", "c.yaml", "-topic", "mqtarget"},
				files: map[string]string{"c.yaml": "topic: filetopic\n"}, env: map[string]string{"MQTARGET_TOPIC": "envtopic"}},
			want: func(*config.Config) {},
		},
		{
			name: "nested flags",
			src: sources{args: []string{
				"-http.addr", "127.0.0.1:1234", "-nsq.hosts", "a:1,b:2", "-message.max_size", "500", "-message.size", "40",
				"-async.max_in_flight", "3", "-publish_timeout", "2s", "-nsq.producers_per_host=8", "-nsq.dial_timeout", "100ms",
				"-topic2", "other", "-shutdown_grace", "0s", "-log.format", "json", "-nsq.embedded", "2",
			}},
			want: func(c *config.Config) {
				c.HTTP.Addr = "127.0.0.1:1234"
				c.NSQ.Hosts = []string{"a:1", "b:2"}
				c.Message.MaxSize = 500
				c.Message.Size = 40
				c.Async.MaxInFlight = 3
				c.PublishTimeout = 2 * time.Second
				c.NSQ.ProducersPerHost = 8
				c.NSQ.DialTimeout = 100 * time.Millisecond
				c.Topic2 = "other"
				c.ShutdownGrace = 0
				c.Log.Format = "json"
				c.NSQ.Embedded = 2
			},
		},
		{
			name: "nested env",
			src: sources{env: map[string]string{
				"MQTARGET_HTTP_ADDR": ":7000", "MQTARGET_BROKER": "nsq", "MQTARGET_NSQ_HOSTS": "x:1,y:2,z:3",
				"MQTARGET_MESSAGE_MAX_SIZE": "999", "MQTARGET_MESSAGE_SIZE": "99", "MQTARGET_ASYNC_MAX_IN_FLIGHT": "5",
				"MQTARGET_NSQ_PRODUCERS_PER_HOST": "3", "MQTARGET_NSQ_DIAL_TIMEOUT": "1m0s", "MQTARGET_PUBLISH_TIMEOUT": "2m",
				"MQTARGET_HTTP_WRITE_TIMEOUT": "3m", "MQTARGET_LOG_LEVEL": "warn", "UNRELATED": "ignored",
			}},
			want: func(c *config.Config) {
				c.HTTP.Addr = ":7000"
				c.NSQ.Hosts = []string{"x:1", "y:2", "z:3"}
				c.Message.MaxSize = 999
				c.Message.Size = 99
				c.Async.MaxInFlight = 5
				c.PublishTimeout = 2 * time.Minute
				c.HTTP.WriteTimeout = 3 * time.Minute
				c.NSQ.ProducersPerHost = 3
				c.NSQ.DialTimeout = time.Minute
				c.Log.Level = "warn"
			},
		},
		{
			name: "comma list trims spaces and drops empty items",
			src:  sources{env: map[string]string{"MQTARGET_NSQ_HOSTS": " a:1 , b:2 ,, "}},
			want: func(c *config.Config) { c.NSQ.Hosts = []string{"a:1", "b:2"} },
		},
		{
			name: "empty flag list clears the file's hosts",
			src: sources{args: []string{"-config", "c.yaml", "-nsq.hosts", ""},
				files: map[string]string{"c.yaml": "nsq: {hosts: [a:1, b:2]}\n"}},
			want: func(c *config.Config) { c.NSQ.Hosts = nil },
		},
		{
			name: "empty env list clears the file's hosts",
			src: sources{env: map[string]string{"MQTARGET_CONFIG": "c.yaml", "MQTARGET_NSQ_HOSTS": ""},
				files: map[string]string{"c.yaml": "nsq: {hosts: [a:1, b:2]}\n"}},
			want: func(c *config.Config) { c.NSQ.Hosts = nil },
		},
		{
			name: "YAML flow style and durations",
			src: sources{args: []string{"-config", "c.yaml"}, files: map[string]string{
				"c.yaml": "http: {addr: \"localhost:81\"}\npublish_timeout: 750ms\nshutdown_grace: 1m30s\nnsq: {dial_timeout: 500ms}\n"}},
			want: func(c *config.Config) {
				c.HTTP.Addr = "localhost:81"
				c.PublishTimeout = 750 * time.Millisecond
				c.ShutdownGrace = 90 * time.Second
				c.NSQ.DialTimeout = 500 * time.Millisecond
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, opts, err := tc.src.load(t)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := config.Default()
			tc.want(&want)
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Errorf("Load =\n%+v\nwant\n%+v", got, want)
			}
			if opts.PrintConfig {
				t.Errorf("PrintConfig set without -print-config")
			}
		})
	}
}

// TestUserFacingNames pins the exact flag, environment and YAML names users type.
func TestUserFacingNames(t *testing.T) {
	type field struct {
		name string
		get  func(config.Config) any
		want any
	}
	addr := field{"http.addr", func(c config.Config) any { return c.HTTP.Addr }, "10.0.0.1:8181"}
	broker := field{"broker", func(c config.Config) any { return c.Broker }, "stomp"}
	hosts := field{"nsq.hosts", func(c config.Config) any { return c.NSQ.Hosts }, []string{"n1:4150", "n2:4150"}}
	pprof := field{"pprof.addr", func(c config.Config) any { return c.PProf.Addr }, "127.0.0.1:6060"}
	for _, tc := range []struct {
		name string
		src  sources
		f    field
	}{
		{"flag -http.addr", sources{args: []string{"-http.addr", "10.0.0.1:8181"}}, addr},
		{"env MQTARGET_HTTP_ADDR", sources{env: map[string]string{"MQTARGET_HTTP_ADDR": "10.0.0.1:8181"}}, addr},
		{"yaml http.addr", sources{args: []string{"-config", "f"}, files: map[string]string{"f": "http:\n  addr: 10.0.0.1:8181\n"}}, addr},
		{"flag -broker", sources{args: []string{"-broker", "stomp"}}, broker},
		{"env MQTARGET_BROKER", sources{env: map[string]string{"MQTARGET_BROKER": "stomp"}}, broker},
		{"yaml broker", sources{args: []string{"-config", "f"}, files: map[string]string{"f": "broker: stomp\n"}}, broker},
		{"flag -nsq.hosts", sources{args: []string{"-nsq.hosts", "n1:4150,n2:4150"}}, hosts},
		{"env MQTARGET_NSQ_HOSTS", sources{env: map[string]string{"MQTARGET_NSQ_HOSTS": "n1:4150,n2:4150"}}, hosts},
		{"yaml nsq.hosts", sources{args: []string{"-config", "f"}, files: map[string]string{"f": "nsq:\n  hosts:\n    - n1:4150\n    - n2:4150\n"}}, hosts},
		{"flag -pprof.addr", sources{args: []string{"-pprof.addr", "127.0.0.1:6060"}}, pprof},
		{"env MQTARGET_PPROF_ADDR", sources{env: map[string]string{"MQTARGET_PPROF_ADDR": "127.0.0.1:6060"}}, pprof},
		{"yaml pprof.addr", sources{args: []string{"-config", "f"}, files: map[string]string{"f": "pprof:\n  addr: 127.0.0.1:6060\n"}}, pprof},
		{"flag -config", sources{args: []string{"-config", "f"}, files: map[string]string{"f": "broker: stomp\n"}}, broker},
		{"env MQTARGET_CONFIG", sources{env: map[string]string{"MQTARGET_CONFIG": "f"}, files: map[string]string{"f": "broker: stomp\n"}}, broker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := tc.src.load(t)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := tc.f.get(cfg); !reflect.DeepEqual(got, tc.f.want) {
				t.Errorf("%s = %#v, want %#v", tc.f.name, got, tc.f.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     sources
		want    []string // substrings of the error
		notWant []string
		is      error
	}{
		{name: "bad second host", src: sources{args: []string{"-nsq.hosts", "good:4150,nocolon"}},
			want: []string{"nsq.hosts[1]: ", `"nocolon"`}, notWant: []string{"nsq.hosts[0]"}},
		{name: "host without port number", src: sources{env: map[string]string{"MQTARGET_NSQ_HOSTS": "a:1,b:2,c:x"}},
			want: []string{"nsq.hosts[2]: "}, notWant: []string{"nsq.hosts[0]", "nsq.hosts[1]"}},
		{name: "host without host", src: sources{args: []string{"-nsq.hosts", ":4150"}}, want: []string{"nsq.hosts[0]: "}},
		{name: "message.size zero", src: sources{args: []string{"-message.size", "0"}}, want: []string{"message.size: "}},
		{name: "message.size over max_size", src: sources{args: []string{"-message.size", "2000", "-message.max_size", "1000"}},
			want: []string{"message.size: ", "2000"}, notWant: []string{"message.max_size: "}},
		{name: "message.max_size zero", src: sources{args: []string{"-message.max_size", "0"}}, want: []string{"message.max_size: "}},
		{name: "message.max_size too large", src: sources{args: []string{"-message.max_size", "100000000"}}, want: []string{"message.max_size: "}},
		{name: "unknown broker flag", src: sources{args: []string{"-broker", "pulsar"}}, want: []string{"broker: ", `"pulsar"`}},
		{name: "unknown broker env", src: sources{env: map[string]string{"MQTARGET_BROKER": "pulsar"}}, want: []string{"broker: ", `"pulsar"`}},
		{name: "unknown broker file", src: sources{args: []string{"-config", "f"}, files: map[string]string{"f": "broker: pulsar\n"}}, want: []string{"broker: "}},
		{name: "publish_timeout zero", src: sources{args: []string{"-publish_timeout", "0s"}}, want: []string{"publish_timeout: "}},
		{name: "publish_timeout negative", src: sources{env: map[string]string{"MQTARGET_PUBLISH_TIMEOUT": "-1s"}}, want: []string{"publish_timeout: "}},
		{name: "dial_timeout above publish_timeout", src: sources{args: []string{"-publish_timeout", "500ms"}},
			want: []string{"nsq.dial_timeout: ", "publish_timeout"}},
		{name: "dial_timeout zero", src: sources{args: []string{"-nsq.dial_timeout", "0s"}}, want: []string{"nsq.dial_timeout: "}},
		{name: "log.level", src: sources{args: []string{"-log.level", "verbose"}}, want: []string{"log.level: ", `"verbose"`}},
		{name: "log.format", src: sources{args: []string{"-log.format", "xml"}}, want: []string{"log.format: "}},
		{name: "http.addr", src: sources{args: []string{"-http.addr", "8080"}}, want: []string{"http.addr: "}},
		{name: "pprof.addr without port", src: sources{args: []string{"-pprof.addr", "localhost"}}, want: []string{"pprof.addr: ", `"localhost"`}},
		{name: "pprof.addr port not a number", src: sources{env: map[string]string{"MQTARGET_PPROF_ADDR": "127.0.0.1:pprof"}}, want: []string{"pprof.addr: "}},
		{name: "pprof.addr port out of range", src: sources{args: []string{"-pprof.addr", ":70000"}}, want: []string{"pprof.addr: "}},
		{name: "pprof.addr same as http.addr", src: sources{args: []string{"-pprof.addr", ":8080"}}, want: []string{"pprof.addr: ", "http.addr"}},
		{name: "empty topic", src: sources{args: []string{"-topic", ""}}, want: []string{"topic: "}, notWant: []string{"topic2"}},
		{name: "empty topic2", src: sources{args: []string{"-topic2", ""}}, want: []string{"topic2: "}},
		{name: "async.max_in_flight", src: sources{args: []string{"-async.max_in_flight", "0"}}, want: []string{"async.max_in_flight: "}},
		{name: "shutdown_grace negative", src: sources{args: []string{"-shutdown_grace", "-1s"}}, want: []string{"shutdown_grace: "}},
		{name: "producers_per_host", src: sources{args: []string{"-nsq.producers_per_host", "0"}}, want: []string{"nsq.producers_per_host: "}},
		{name: "embedded zero disables the default broker", src: sources{args: []string{"-nsq.embedded", "0"}},
			want: []string{"nsq.hosts: ", "not enabled"}, notWant: []string{"nsq.embedded: "}},
		{name: "unknown environment variable", src: sources{env: map[string]string{"MQTARGET_NSQ_HOST": "a:4150"}},
			want: []string{"MQTARGET_NSQ_HOST: unknown environment variable"}},
		{name: "unknown environment variables each named", src: sources{env: map[string]string{"MQTARGET_LOG_LEVL": "debug", "MQTARGET_X": ""}},
			want: []string{"MQTARGET_LOG_LEVL: ", "MQTARGET_X: "}},
		{name: "unknown environment variable beside a bad known one", src: sources{env: map[string]string{
			"MQTARGET_TOPICS": "3", "MQTARGET_MESSAGE_SIZE": "big"}},
			want: []string{"MQTARGET_TOPICS: unknown", "message.size (from MQTARGET_MESSAGE_SIZE)"}},
		{name: "several errors at once", src: sources{args: []string{"-log.level", "loud", "-message.size", "-5"}},
			want: []string{"log.level: ", "message.size: "}},
		{name: "bad env integer names key and variable", src: sources{env: map[string]string{"MQTARGET_MESSAGE_SIZE": "abc"}},
			want: []string{"message.size", "MQTARGET_MESSAGE_SIZE", `"abc"`}},
		{name: "bad env duration names key and variable", src: sources{env: map[string]string{"MQTARGET_PUBLISH_TIMEOUT": "5"}},
			want: []string{"publish_timeout", "MQTARGET_PUBLISH_TIMEOUT"}},
		{name: "bad flag integer names key and flag", src: sources{args: []string{"-async.max_in_flight", "many"}},
			want: []string{"async.max_in_flight", "-async.max_in_flight", `"many"`}},
		{name: "bad flag duration", src: sources{args: []string{"-nsq.dial_timeout", "soon"}}, want: []string{"nsq.dial_timeout", "-nsq.dial_timeout"}},
		{name: "unknown top-level YAML key", src: sources{args: []string{"-config", "f"}, files: map[string]string{"f": "brokr: nsq\n"}},
			want: []string{"brokr", "f"}},
		{name: "unknown nested YAML key", src: sources{args: []string{"-config", "f"}, files: map[string]string{"f": "nsq:\n  hostz: [a:1]\n"}},
			want: []string{"hostz"}},
		{name: "YAML type mismatch", src: sources{args: []string{"-config", "f"}, files: map[string]string{"f": "message: {size: big}\n"}},
			want: []string{"big"}},
		{name: "YAML bad duration", src: sources{args: []string{"-config", "f"}, files: map[string]string{"f": "publish_timeout: later\n"}},
			want: []string{"later"}},
		{name: "invalid value in YAML is validated", src: sources{args: []string{"-config", "f"}, files: map[string]string{"f": "nsq: {hosts: [ok:1, bad]}\n"}},
			want: []string{"nsq.hosts[1]: "}},
		{name: "missing -config file", src: sources{args: []string{"-config", "nope.yaml"}}, want: []string{"nope.yaml"}, is: fs.ErrNotExist},
		{name: "missing MQTARGET_CONFIG file", src: sources{env: map[string]string{"MQTARGET_CONFIG": "gone.yaml"}}, want: []string{"gone.yaml"}, is: fs.ErrNotExist},
		{name: "stray positional argument", src: sources{args: []string{"-broker", "nsq", "extra"}}, want: []string{`"extra"`}},
		{name: "unknown flag", src: sources{args: []string{"-nsq.hostz", "a:1"}}, want: []string{"nsq.hostz"}},
		{name: "flag without value", src: sources{args: []string{"-nsq.hosts"}}, want: []string{"nsq.hosts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.src.load(t)
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q should not contain %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

// TestValidateFieldNames checks Validate directly, one broken field at a time, so each message names
// exactly its field.
func TestValidateFieldNames(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*config.Config)
	}{
		{"http.addr", func(c *config.Config) { c.HTTP.Addr = "no-port" }},
		{"pprof.addr", func(c *config.Config) { c.PProf.Addr = "127.0.0.1" }},
		{"http.admin_addr", func(c *config.Config) { c.HTTP.AdminAddr = "127.0.0.1" }},
		{"http.admin_addr", func(c *config.Config) { c.HTTP.AdminAddr = c.HTTP.Addr }},
		{"topics.max_distinct", func(c *config.Config) { c.Topics.MaxDistinct = -1 }},
		{"broker", func(c *config.Config) { c.Broker = "" }},
		{"topic", func(c *config.Config) { c.Topic = "" }},
		{"topic2", func(c *config.Config) { c.Topic2 = "" }},
		{"message.max_size", func(c *config.Config) { c.Message.MaxSize = 64<<20 + 1 }},
		{"message.size", func(c *config.Config) { c.Message.Size = c.Message.MaxSize + 1 }},
		{"publish_timeout", func(c *config.Config) { c.PublishTimeout = 0 }},
		{"async.max_in_flight", func(c *config.Config) { c.Async.MaxInFlight = -1 }},
		{"shutdown_grace", func(c *config.Config) { c.ShutdownGrace = -time.Second }},
		{"shutdown_lame_duck", func(c *config.Config) { c.ShutdownLameDuck = -time.Second }},
		{"gc_percent", func(c *config.Config) { c.GCPercent = -1 }},
		{"http.read_header_timeout", func(c *config.Config) { c.HTTP.ReadHeaderTimeout = 0 }},
		{"http.read_timeout", func(c *config.Config) { c.HTTP.ReadTimeout = -time.Second }},
		{"http.idle_timeout", func(c *config.Config) { c.HTTP.IdleTimeout = 0 }},
		{"http.write_timeout", func(c *config.Config) { c.HTTP.WriteTimeout = c.PublishTimeout }},
		{"http.write_timeout", func(c *config.Config) { c.PublishTimeout = time.Second; c.HTTP.WriteTimeout = c.Readyz.Timeout }},
		{"http.max_header_bytes", func(c *config.Config) { c.HTTP.MaxHeaderBytes = 4095 }},
		{"http.max_connections", func(c *config.Config) { c.HTTP.MaxConnections = -1 }},
		{"http.max_requests", func(c *config.Config) { c.HTTP.MaxRequests = -1 }},
		{"log.level", func(c *config.Config) { c.Log.Level = "INFO" }},
		{"log.format", func(c *config.Config) { c.Log.Format = "" }},
		{"nsq.hosts[1]", func(c *config.Config) { c.NSQ.Hosts = []string{"a:1", "b"} }},
		{"nsq.producers_per_host", func(c *config.Config) { c.NSQ.ProducersPerHost = 65 }},
		{"nsq.dial_timeout", func(c *config.Config) { c.NSQ.DialTimeout = c.PublishTimeout + time.Millisecond }},
		{"nsq.embedded", func(c *config.Config) { c.NSQ.Embedded = 17 }},
		{"nsq.embedded_max_disk", func(c *config.Config) { c.NSQ.EmbeddedMaxDisk = 1000 }},
		{"http.tls_cert_file", func(c *config.Config) { c.HTTP.TLSKeyFile = "key.pem" }},
		{"nsq.tls", func(c *config.Config) { c.NSQ.TLSConfig.Enabled = true }}, // embedded nsqd has no TLS
		{"nsq.tls_ca_file", func(c *config.Config) { c.NSQ.TLSConfig.CAFile = "ca.pem" }},
		{"stomp.tls_server_name", func(c *config.Config) { c.STOMP.TLSConfig.ServerName = "broker" }},
		{"stomp.tls_cert_file", func(c *config.Config) {
			c.STOMP.Hosts = []string{"a:1"}
			c.STOMP.TLSConfig = publishers.TLSConfig{Enabled: true, CertFile: "client.pem"}
		}},
		{"rocketmq.tls_ca_file", func(c *config.Config) {
			c.RocketMQ.TLSConfig = publishers.TLSConfig{Enabled: true, InsecureSkipVerify: true, CAFile: "ca.pem"}
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			c := config.Default()
			tc.set(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 {
				t.Errorf("want exactly one error, got %q", lines)
			}
			if !strings.HasPrefix(err.Error(), tc.field+": ") {
				t.Errorf("error %q does not start with %q", err, tc.field+": ")
			}
		})
	}
	t.Run("limits are inclusive", func(t *testing.T) {
		c := config.Default()
		c.Message.MaxSize = 64 << 20
		c.Message.Size = c.Message.MaxSize
		c.NSQ.DialTimeout = c.PublishTimeout
		c.NSQ.Hosts = []string{"a:1"}
		c.NSQ.Embedded = 0 // ignored with hosts
		c.ShutdownGrace = 0
		c.ShutdownLameDuck = 0
		c.HTTP.MaxHeaderBytes = 4096
		c.HTTP.MaxConnections, c.HTTP.MaxRequests = 0, 0         // no limit
		c.HTTP.Addr, c.PProf.Addr = "127.0.0.1:0", "127.0.0.1:0" // two ephemeral ports, not one
		c.HTTP.AdminAddr = "127.0.0.1:0"
		c.Topics.MaxDistinct = 0 // no limit
		if err := c.Validate(); err != nil {
			t.Errorf("Validate() = %v", err)
		}
	})
}

func TestPrintConfigOption(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"-print-config"}, true},
		{[]string{"--print-config", "-topic", "t"}, true},
		{[]string{"-print-config=false"}, false},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			_, opts, err := sources{args: tc.args}.load(t)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if opts.PrintConfig != tc.want {
				t.Errorf("PrintConfig = %v, want %v", opts.PrintConfig, tc.want)
			}
		})
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"everything changed", []string{
			"-http.addr", "127.0.0.1:9999", "-topic", "a.b_c-d", "-topic2", "t2#ephemeral", "-message.size", "10",
			"-message.max_size", "20", "-publish_timeout", "1m30s", "-http.write_timeout", "2m", "-async.max_in_flight", "3", "-shutdown_grace", "250ms",
			"-shutdown_lame_duck", "0s", "-http.read_timeout", "3s", "-http.max_requests", "7", "-http.max_connections", "0",
			"-log.level", "error", "-log.format", "json", "-nsq.hosts", "a:1,b:2,c:3", "-nsq.producers_per_host", "5",
			"-nsq.dial_timeout", "1500ms", "-nsq.embedded", "4",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _, err := sources{args: tc.args}.load(t)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			out, err := want.YAML()
			if err != nil {
				t.Fatalf("YAML: %v", err)
			}
			for _, key := range []string{"http:\n", "  addr: ", "broker: ", "nsq:\n", "  hosts:", "publish_timeout: ", "message:\n", "  max_size: "} {
				if !bytes.Contains(out, []byte(key)) {
					t.Errorf("YAML lacks %q:\n%s", key, out)
				}
			}
			if !bytes.Contains(out, []byte("publish_timeout: "+want.PublishTimeout.String()+"\n")) {
				t.Errorf("publish_timeout is not written as a duration string:\n%s", out)
			}
			got, _, err := sources{args: []string{"-config", "printed.yaml"}, files: map[string]string{"printed.yaml": string(out)}}.load(t)
			if err != nil {
				t.Fatalf("Load of printed YAML: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Errorf("round trip:\n got %+v\nwant %+v\nYAML:\n%s", got, want, out)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	_, _, err := config.Load(config.Sources{Args: []string{"-h"}, Output: &out})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Load(-h) = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"-config", "MQTARGET_CONFIG", "-print-config", "-nsq.hosts", "MQTARGET_NSQ_HOSTS", "-http.addr", "MQTARGET_HTTP_ADDR", "(default :8080)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func TestLoadNilLookupEnv(t *testing.T) {
	cfg, _, err := config.Load(config.Sources{Args: []string{"-topic", "x"}, Output: io.Discard})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Topic != "x" {
		t.Errorf("Topic = %q", cfg.Topic)
	}
}

func TestAuthToken(t *testing.T) {
	files := map[string]string{
		"token":   "s3cret-token\n",
		"spaced":  "  \ts3cret\r\n\n",
		"empty":   "",
		"blank":   " \n\t\n",
		"inner":   "two words\n",
		"control": "a\x00b",
	}
	read := func(name string) ([]byte, error) {
		if v, ok := files[name]; ok {
			return []byte(v), nil
		}
		return nil, fmt.Errorf("open %s: no such file or directory", name)
	}
	for _, tc := range []struct {
		name, file, want, wantErr string
	}{
		{name: "unset: no token", file: "", want: ""},
		{name: "trailing newline trimmed", file: "token", want: "s3cret-token"},
		{name: "surrounding white space trimmed", file: "spaced", want: "s3cret"},
		{name: "empty file", file: "empty", wantErr: "holds no token"},
		{name: "white space only", file: "blank", wantErr: "holds no token"},
		{name: "space inside", file: "inner", wantErr: "printable ASCII"},
		{name: "control character", file: "control", wantErr: "printable ASCII"},
		{name: "missing file", file: "missing", wantErr: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := config.HTTP{AuthTokenFile: tc.file}.AuthToken(read)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), "http.auth_token_file: ") || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("AuthToken() = %q, %v; want an error naming http.auth_token_file with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("AuthToken() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestEnvNotSettings: the variables that are not settings but that mqtarget reads or the repository's
// scripts and tests export pass the unknown-variable check; other environment variables are not looked at.
func TestEnvNotSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"config file", map[string]string{"MQTARGET_CONFIG": "f"}},
		{"a setting", map[string]string{"MQTARGET_READYZ_BROKERS": "nsq"}},
		{"scripts' variables", map[string]string{"MQTARGET_CACHE": "/c", "MQTARGET_DATA": "/d", "MQTARGET_NSQD_BIN": "/n",
			"MQTARGET_INTEGRATION": "1", "MQTARGET_TEST_MAIN": "1", "MQTARGET_KEEP_RUN": "1", "MQTARGET_ROCKETMQ_NAMESRV": "a:1"}},
		{"scripts' broker prefixes", map[string]string{"MQTARGET_ARTEMIS_STOMP": "a:1", "MQTARGET_ACTIVEMQ_LOGIN": "x",
			"MQTARGET_RABBITMQ_PIDFILE": "/p"}},
		{"other prefixes", map[string]string{"PATH": "/bin", "MQTARGETX": "1", "mqtarget_lower": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := (sources{env: tc.env, files: map[string]string{"f": ""}}).load(t); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

// TestRepositoryVariablesLetThrough: every MQTARGET_* variable the repository's Go code reads by name
// (tests included) or its scripts set or read passes the unknown-variable check, so a shell prepared
// for scripts/test.sh, or for one test as docs/ describes (MQTARGET_AMQP_KILL=1), still starts
// mqtarget: it once stopped every test of cmd/mqtarget that runs the binary.
func TestRepositoryVariablesLetThrough(t *testing.T) {
	read := regexp.MustCompile(`(?:Getenv|LookupEnv)\("(MQTARGET_[A-Z0-9_]+)"\)`)
	named := regexp.MustCompile(`\bMQTARGET_[A-Z0-9_]*[A-Z0-9]\b`)
	found := map[string]string{} // name -> a file that has it
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		var re *regexp.Regexp // its last group (or the whole match) is the name
		switch {
		case d.IsDir():
			return nil
		case strings.HasSuffix(path, ".go"):
			re = read
		case strings.HasSuffix(path, ".sh") || path == "../.ci/run":
			re = named
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			found[string(m[len(m)-1])] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 10 {
		t.Fatalf("found only %d variables (%v): is the walk in the wrong directory?", len(found), found)
	}
	for name, file := range found {
		_, _, err := config.Load(config.Sources{
			LookupEnv: func(string) (string, bool) { return "", false }, // only the name is checked
			Environ:   func() []string { return []string{name + "=1"} },
			ReadFile:  os.ReadFile,
			Output:    io.Discard,
		})
		if err != nil {
			t.Errorf("%s (in %s): %v", name, file, err)
		}
	}
}
