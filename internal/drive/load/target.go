package load

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Target is what a mqtarget says about itself: its build and effective configuration (GET /config,
// secrets redacted there) and its broker setup (GET / as JSON).
type Target struct {
	Version       string         `json:"version"`
	Revision      string         `json:"revision,omitempty"`
	GoVersion     string         `json:"go_version,omitempty"`
	DefaultBroker string         `json:"default_broker,omitempty"`
	Brokers       map[string]any `json:"brokers,omitempty"` // the index's "setup": hosts, embedded or not
	// BrokerVersions are what each broker's hosts said they run (the index's brokers.*.versions; "" for
	// a host not connected yet).
	BrokerVersions map[string][]string `json:"broker_versions,omitempty"`
	Config         map[string]any      `json:"config,omitempty"`
}

// Describe asks the server at u's scheme and host whether it is a mqtarget, with two GETs; nil when
// it does not answer like one (any other URL: nothing is claimed about it). Its client is NewClient's:
// no proxy, no redirect (a 3xx is not a mqtarget's answer), so it asks nobody but u's host.
func Describe(ctx context.Context, u string) *Target {
	p, err := ValidateURL(u)
	if err != nil {
		return nil
	}
	client := NewClient(describeTimeout, 1)
	defer client.CloseIdleConnections()
	base := url.URL{Scheme: p.Scheme, Host: p.Host, User: p.User}
	var cfg struct {
		Version struct {
			Version   string `json:"version"`
			Revision  string `json:"revision"`
			GoVersion string `json:"go_version"`
		} `json:"version"`
		Config map[string]any `json:"config"`
	}
	var index struct {
		Endpoints     []any          `json:"endpoints"`
		DefaultBroker string         `json:"default_broker"`
		Setup         map[string]any `json:"setup"`
		Brokers       map[string]struct {
			Versions []string `json:"versions"`
		} `json:"brokers"`
	}
	base.Path = "/"
	if !getJSON(ctx, client, base.String(), &index) || index.Endpoints == nil {
		return nil
	}
	t := &Target{DefaultBroker: index.DefaultBroker, Brokers: index.Setup, Version: "unknown"}
	for name, b := range index.Brokers {
		if b.Versions != nil {
			if t.BrokerVersions == nil {
				t.BrokerVersions = map[string][]string{}
			}
			t.BrokerVersions[name] = b.Versions
		}
	}
	base.Path = "/config"
	if getJSON(ctx, client, base.String(), &cfg) && cfg.Config != nil {
		t.Version, t.Revision, t.GoVersion, t.Config = cfg.Version.Version, cfg.Version.Revision, cfg.Version.GoVersion, cfg.Config
	}
	return t
}

const describeTimeout = 2 * time.Second

func getJSON(ctx context.Context, client *http.Client, u string, v any) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v) == nil
}
