package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/version"
)

// TestEmbeddedOnlyInUse: embedded servers start for the default broker and embedded_brokers only, and
// not at all with embedded: 0; every listener Start opens is accounted for, and ?broker= of a broker
// not in use answers 400 naming broker.
func TestEmbeddedOnlyInUse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mod       func(*config.Config)
		wantNSQ   bool // embedded nsqd running
		wantSTOMP bool // embedded go-stomp running
		disabled  string
	}{
		{"default: nsq only", func(*config.Config) {}, true, false, "stomp"},
		{"stomp in embedded_brokers", func(c *config.Config) { c.EmbeddedBrokers = []string{"stomp"} }, true, true, ""},
		{"stomp default, nsq embedded 0", func(c *config.Config) { c.Broker = "stomp"; c.NSQ.Embedded = 0 }, false, true, "nsq"},
		{"stomp default with 2 servers", func(c *config.Config) {
			c.Broker = "stomp"
			c.NSQ.Embedded = 0
			c.STOMP.Embedded = 2
		}, false, true, "nsq"},
		{"default broker external", func(c *config.Config) { c.NSQ.Hosts = []string{"127.0.0.1:1"} }, false, false, "stomp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.HTTP.Addr = "127.0.0.1:0"
			tc.mod(&cfg)
			before := listeningPorts(t)
			a := startApp(t, func(c *config.Config) { *c = cfg })
			defer shutdownApp(t, a)

			want := map[int]bool{portOf(t, a.Addr()): true}
			var tcp, httpAddrs, stompAddrs []string
			if e := a.Embedded("nsq"); e != nil {
				tcp, httpAddrs = e.Addrs, e.Setup["http"].([]string)
			}
			if e := a.Embedded("stomp"); e != nil {
				stompAddrs = e.Addrs
			}
			if (tcp != nil) != tc.wantNSQ || (stompAddrs != nil) != tc.wantSTOMP {
				t.Fatalf("embedded nsqd %v, go-stomp %v; want %v, %v", tcp, stompAddrs, tc.wantNSQ, tc.wantSTOMP)
			}
			for _, addr := range append(append(tcp, httpAddrs...), stompAddrs...) {
				want[portOf(t, addr)] = true
			}
			checkOpened(t, before, want)
			if tc.disabled == "" {
				return
			}
			code, body := httpGet(t, "http://"+a.Addr()+"/send1?broker="+tc.disabled)
			var reply struct{ Error, Field string }
			_ = json.Unmarshal([]byte(body), &reply)
			if code != http.StatusBadRequest || reply.Field != "broker" || !strings.Contains(reply.Error, "not enabled") {
				t.Errorf("?broker=%s: %d %s, want 400 naming broker, not enabled", tc.disabled, code, body)
			}
		})
	}
}

// TestReadyzRequiresDefaultBroker: against the real embedded brokers, /readyz reports both and fails
// only for the required ones: an external stomp host nobody listens on is reported down, and /readyz
// answers 503 only once readyz.brokers lists stomp.
func TestReadyzRequiresDefaultBroker(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ready  []string
		status int
	}{
		{"default broker only", nil, http.StatusOK},
		{"stomp required", []string{"nsq", "stomp"}, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startApp(t, func(c *config.Config) {
				*c = config.Default()
				c.HTTP.Addr = "127.0.0.1:0"
				c.STOMP.Hosts = []string{"127.0.0.1:1"} // nothing listens on port 1
				c.Readyz.Brokers = tc.ready
			})
			defer shutdownApp(t, a)
			code, body := httpGet(t, "http://"+a.Addr()+"/readyz")
			var r struct {
				Brokers map[string]struct {
					Required bool
					Ready    bool
					Hosts    []struct{ Host, State string }
				}
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if code != tc.status {
				t.Errorf("/readyz %d, want %d: %s", code, tc.status, body)
			}
			nsq, stomp := r.Brokers["nsq"], r.Brokers["stomp"]
			if !nsq.Ready || len(nsq.Hosts) != 3 || !nsq.Required {
				t.Errorf("nsq %+v, want 3 embedded hosts up, required", nsq)
			}
			if stomp.Ready || len(stomp.Hosts) != 1 || stomp.Hosts[0].State != "down" || stomp.Required != (tc.ready != nil) {
				t.Errorf("stomp %+v, want its one host down", stomp)
			}
		})
	}
}

func TestBuildInfoMetric(t *testing.T) {
	a := startApp(t, func(*config.Config) {})
	defer shutdownApp(t, a)
	v := version.Get()
	want := `mqtarget_build_info{goversion="` + v.GoVersion + `",revision="` + v.Revision + `",version="` + v.Version + `"} 1`
	if _, body := httpGet(t, "http://"+a.Addr()+"/metrics"); !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// checkOpened fails t unless the ports listening now, and not in before, are exactly want.
func checkOpened(t *testing.T, before, want map[int]bool) {
	t.Helper()
	opened := map[int]bool{}
	for p := range listeningPorts(t) {
		if !before[p] {
			opened[p] = true
		}
	}
	if len(opened) != len(want) {
		t.Errorf("Start opened listeners on ports %v, want %v", opened, want)
	}
	for p := range want {
		if !opened[p] {
			t.Errorf("port %d is not listening (opened %v)", p, opened)
		}
	}
}
