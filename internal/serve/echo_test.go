package serve

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
)

// embeddedConfig runs one embedded nsqd and one embedded STOMP server.
func embeddedConfig(mod func(*config.Config)) config.Config {
	return testConfig(func(c *config.Config) {
		c.NSQ.Hosts, c.NSQ.Embedded = nil, 1
		c.STOMP.Hosts, c.STOMP.Embedded = nil, 1
		c.EmbeddedBrokers = []string{"stomp"} // only the default broker runs embedded otherwise
		mod(c)
	})
}

// runApp starts an app on cfg and shuts it down when the test ends.
func runApp(t *testing.T, cfg config.Config) *App {
	t.Helper()
	a, err := Start(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return a
}

// TestRoundTripWiring: with the default echo settings /sendRoundTrip comes back on both embedded brokers
// and the round-trip metrics count it; with the echo off it times out with 504; an ack topic a broker
// refuses stops the start naming echo.ack_suffix.
func TestRoundTripWiring(t *testing.T) {
	cases := []struct {
		name   string
		mod    func(*config.Config)
		status int
	}{
		{name: "echo in process", mod: func(*config.Config) {}, status: http.StatusOK},
		{name: "direct handoff", mod: func(c *config.Config) { c.Echo.Handoff, c.Echo.Workers = "direct", 1 }, status: http.StatusOK},
		{name: "echo off", mod: func(c *config.Config) {
			c.Echo.Enabled, c.PublishTimeout, c.NSQ.DialTimeout = false, 300*time.Millisecond, 300*time.Millisecond
		}, status: http.StatusGatewayTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := runApp(t, embeddedConfig(c.mod))
			for _, broker := range []string{"nsq", "stomp"} {
				// Connect first: on a busy machine a dial within the round trip's short timeout could
				// fail it with 503 before the missing echo is what times it out.
				resp, err := http.Get("http://" + a.Addr() + "/send1?broker=" + broker)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: /send1 status %d", broker, resp.StatusCode)
				}
				resp, err = http.Get("http://" + a.Addr() + "/sendRoundTrip?broker=" + broker)
				if err != nil {
					t.Fatal(err)
				}
				var got struct {
					Topic string  `json:"topic"`
					RTT   float64 `json:"rtt_ms"`
				}
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				if err != nil || resp.StatusCode != c.status {
					t.Fatalf("%s: status %d (%v), want %d", broker, resp.StatusCode, err, c.status)
				}
				if c.status == http.StatusOK && (got.Topic != "mqtarget_roundtrip" || got.RTT <= 0) {
					t.Errorf("%s: reply %+v", broker, got)
				}
			}
			resp, err := http.Get("http://" + a.Addr() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := `mqtarget_roundtrip_seconds_count{broker="stomp"} 1`
			if c.status != http.StatusOK {
				want = `mqtarget_roundtrip_lost_total{broker="stomp"} 1`
			}
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		})
	}
}

func TestRoundTripBadAckTopic(t *testing.T) {
	_, err := Start(embeddedConfig(func(c *config.Config) { c.Echo.AckSuffix = "/ack" }), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "echo.ack_suffix") {
		t.Fatalf("Start: %v, want an error naming echo.ack_suffix", err)
	}
}
