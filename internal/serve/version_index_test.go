package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
)

// TestIndexBrokerVersions: without any request, GET / soon shows what every host of the brokers in use
// runs, from the pings at start.
func TestIndexBrokerVersions(t *testing.T) {
	a := runApp(t, embeddedConfig(func(c *config.Config) { c.Echo.Enabled = false }))
	want := map[string]string{"nsq": "nsqd 1.3.0", "stomp": "stompd/"}
	var last map[string]map[string][]string
	for end := time.Now().Add(10 * time.Second); ; {
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.Addr()+"/", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var idx struct {
			Brokers map[string]map[string][]string `json:"brokers"`
		}
		err = json.NewDecoder(resp.Body).Decode(&idx)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		last = idx.Brokers
		if allVersions(last, want) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("GET / brokers %v, want every host's version (%v)", last, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func allVersions(brokers map[string]map[string][]string, want map[string]string) bool {
	for name, prefix := range want {
		b := brokers[name]
		if len(b["versions"]) == 0 || len(b["versions"]) != len(b["hosts"]) {
			return false
		}
		for _, v := range b["versions"] {
			if !strings.HasPrefix(v, prefix) {
				return false
			}
		}
	}
	return true
}
