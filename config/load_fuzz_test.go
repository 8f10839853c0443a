package config_test

import (
	"io"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
)

// FuzzLoad feeds Load a YAML file, one environment variable and one flag, all chosen by the fuzzer. Load
// must not panic; an error must start by naming where it comes from (a key, the config file, or the
// command line), and an accepted configuration must be valid and survive -print-config's YAML.
func FuzzLoad(f *testing.F) {
	for _, s := range []struct {
		yaml, env, flag string
		key             uint8
	}{
		{"", "", "", 0},
		{"http:\n  addr: 127.0.0.1:0\nnsq:\n  hosts: [a:1, b:2]\n", "5s", "3", 3},
		{"topic: x\ntopic2: y\n", "nope", "-1", 7},
		{"topics:\n  max_distinct: 5\n", "a:1,b:2", "1m", 20},
		{"nsq: [1, 2]\n", "true", "false", 30},
		{"http: {addr: ':80', max_requests: 99999999999999999999}\n", "", "x", 1},
		{"unknown: 1\n", "1e3", "0x10", 11},
		{"stomp:\n  hosts:\n    - 'a:1'\n  persistent: maybe\n", " 10 ", "\xff", 45},
		{"&a [*a]", "9223372036854775807s", "-9223372036854775808", 2},
		{"publish_timeout: -1s\n", ",,,", "::1", 15},
	} {
		f.Add(s.yaml, s.env, s.flag, s.key)
	}
	keys := config.Keys()
	f.Fuzz(func(t *testing.T, doc, env, flagVal string, k uint8) {
		key := keys[int(k)%len(keys)][0]
		envKey := keys[(int(k)+7)%len(keys)][0]
		src := config.Sources{
			Args: []string{"-config", "fuzz.yaml", "-" + key + "=" + flagVal},
			LookupEnv: func(name string) (string, bool) {
				if name == config.Env(envKey) {
					return env, true
				}
				return "", false
			},
			ReadFile: func(string) ([]byte, error) { return []byte(doc), nil },
			Output:   io.Discard,
		}
		cfg, _, err := config.Load(src)
		if err != nil {
			if !namesItsSource(err, keys) {
				t.Fatalf("error does not start with a key, the file or the command line: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load accepted a configuration Validate refuses: %v", err)
		}
		out, err := cfg.YAML()
		if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		again, _, err := config.Load(config.Sources{
			Args: []string{"-config", "printed.yaml"},
			ReadFile: func(name string) ([]byte, error) {
				if name == "printed.yaml" {
					return out, nil
				}
				return []byte(doc), nil // the other files (http.auth_token_file) hold what they held
			},
		})
		if err != nil {
			t.Fatalf("the printed configuration does not load: %v\n%s", err, out)
		}
		if out2, _ := again.YAML(); string(out2) != string(out) {
			t.Fatalf("printed configuration changed on reload:\n%s\n---\n%s", out, out2)
		}
	})
}

// namesItsSource reports whether each error joined into err starts with a key or "config" (the file).
// Only the first line counts: a YAML error goes on with the decoder's lines and quotes the input.
func namesItsSource(err error, keys [][2]string) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !namesItsSource(e, keys) {
				return false
			}
		}
		return true
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	if strings.HasPrefix(line, "config") {
		return true
	}
	for _, k := range keys {
		if strings.HasPrefix(line, k[0]+":") || strings.HasPrefix(line, k[0]+" (from ") || strings.HasPrefix(line, k[0]+"[") {
			return true
		}
	}
	return false
}
