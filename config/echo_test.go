package config_test

import (
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
)

// TestEchoQueueBounds: the echo queue's bounds take their whole range and nothing outside it; a value
// outside is one error naming its key.
func TestEchoQueueBounds(t *testing.T) {
	cases := []struct {
		name string
		set  func(*config.Echo)
		key  string // "": valid
	}{
		{name: "no messages", set: func(e *config.Echo) { e.QueueMaxMessages = 0 }, key: "echo.queue_max_messages"},
		{name: "a million and one messages", set: func(e *config.Echo) { e.QueueMaxMessages = 1_000_001 }, key: "echo.queue_max_messages"},
		{name: "no bytes", set: func(e *config.Echo) { e.QueueMaxBytes = 0 }, key: "echo.queue_max_bytes"},
		{name: "negative bytes", set: func(e *config.Echo) { e.QueueMaxBytes = -1 }, key: "echo.queue_max_bytes"},
		{name: "past 16 GiB", set: func(e *config.Echo) { e.QueueMaxBytes = 16<<30 + 1 }, key: "echo.queue_max_bytes"},
		{name: "one message, one byte", set: func(e *config.Echo) { e.QueueMaxMessages, e.QueueMaxBytes = 1, 1 }},
		{name: "a million messages, 16 GiB", set: func(e *config.Echo) { e.QueueMaxMessages, e.QueueMaxBytes = 1_000_000, 16<<30 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			c.set(&cfg.Echo)
			err := cfg.Validate()
			switch {
			case c.key == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case c.key == "":
			case err == nil:
				t.Fatalf("Validate() = nil, want an error naming %s", c.key)
			case strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), c.key+": "):
				t.Errorf("Validate() = %q, want one error starting with %q", err, c.key+": ")
			}
		})
	}
}
