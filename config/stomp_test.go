package config_test

import (
	"strings"
	"testing"
)

func TestSTOMPSettings(t *testing.T) {
	cases := []struct {
		name       string
		src        sources
		persistent bool
		passcode   string
	}{
		{"defaults", sources{}, false, ""},
		{"bool flag alone", sources{args: []string{"-stomp.persistent"}}, true, ""},
		{"bool flag =false over env", sources{args: []string{"-stomp.persistent=false"}, env: map[string]string{"MQTARGET_STOMP_PERSISTENT": "true"}}, false, ""},
		{"env", sources{env: map[string]string{"MQTARGET_STOMP_PERSISTENT": "1", "MQTARGET_STOMP_LOGIN": "u", "MQTARGET_STOMP_PASSCODE": "hunter2"}}, true, "hunter2"},
		{"file", sources{args: []string{"-config", "c.yaml"}, files: map[string]string{"c.yaml": "stomp:\n  login: u\n  passcode: hunter2\n  persistent: true\n"}}, true, "hunter2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, _, err := c.src.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.STOMP.Persistent != c.persistent || string(cfg.STOMP.Passcode) != c.passcode {
				t.Fatalf("persistent %v passcode %q, want %v %q", cfg.STOMP.Persistent, cfg.STOMP.Passcode, c.persistent, c.passcode)
			}
			out, err := cfg.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), "hunter2") {
				t.Errorf("-print-config shows the passcode:\n%s", out)
			}
			if c.passcode != "" && !strings.Contains(string(out), "passcode: <redacted>") {
				t.Errorf("-print-config does not mark the passcode as set:\n%s", out)
			}
		})
	}
}
