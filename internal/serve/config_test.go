package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/version"
)

// TestConfigEndpointRedactsSecrets: /config shows the effective configuration and the build, and a set
// secret only as "<redacted>".
func TestConfigEndpointRedactsSecrets(t *testing.T) {
	const secret = "s3cr3t-passcode"
	a := startApp(t, func(c *config.Config) {
		c.STOMP.Login = "loader"
		c.STOMP.Passcode = secret
		c.Topic = "configured-topic"
	})
	defer a.Shutdown(context.Background())
	resp, err := http.Get("http://" + a.Addr() + "/config")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), secret) {
		t.Fatalf("/config shows the passcode: %s", body)
	}
	var got struct {
		Version map[string]string `json:"version"`
		Config  struct {
			Topic string `json:"topic"`
			STOMP struct {
				Login, Passcode string
			} `json:"stomp"`
		} `json:"config"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if got.Config.Topic != "configured-topic" || got.Config.STOMP.Login != "loader" || got.Config.STOMP.Passcode != "<redacted>" {
		t.Errorf("config %+v", got.Config)
	}
	if got.Version["version"] != version.Get().Version || got.Version["go_version"] == "" {
		t.Errorf("version %v", got.Version)
	}
}
