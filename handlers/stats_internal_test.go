package handlers

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/publishers"
)

func TestWantsHTML(t *testing.T) {
	for _, tc := range []struct {
		name   string
		accept []string
		want   bool
	}{
		{"none", nil, false},
		{"curl", []string{"*/*"}, false},
		{"json", []string{"application/json"}, false},
		{"chromium", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"}, true},
		{"firefox", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, true},
		{"html only", []string{"text/html"}, true},
		{"tie keeps json", []string{"text/html, application/json"}, false},
		{"json preferred", []string{"text/html;q=0.5, application/json"}, false},
		{"html preferred", []string{"application/json;q=0.5", "text/html"}, true},
		{"html refused", []string{"text/html;q=0, */*"}, false},
		{"application wildcard", []string{"text/html;q=0.4, application/*;q=0.5"}, false},
		{"case and spaces", []string{" TEXT/HTML ; Q=0.9 , */*;q=0.1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := wantsHTML(tc.accept); got != tc.want {
				t.Errorf("wantsHTML(%q) = %v, want %v", tc.accept, got, tc.want)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, tc := range []struct {
		name string
		cum  []uint64
		n    uint64
		q    float64
		want float64
	}{
		{"middle of a bucket", []uint64{0, 10, 10}, 10, 0.5, 1.5},
		{"first bucket from 0", []uint64{10, 10, 10}, 10, 0.5, 0.5},
		{"upper end", []uint64{0, 10, 10}, 10, 1, 2},
		{"spread", []uint64{5, 5, 10}, 10, 0.9, 2 + 2*0.8},
		{"beyond the last bound", []uint64{0, 0, 0}, 5, 0.5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.q, bounds, tc.cum, tc.n); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

// okPub acknowledges every publish at once.
type okPub struct{ hosts []string }

func (p okPub) Publish(context.Context, int, string, []byte) error        { return nil }
func (p okPub) PublishBatch(context.Context, int, string, [][]byte) error { return nil }
func (p okPub) PublishAsync(_ int, _ string, _ []byte, done func(error)) error {
	done(nil)
	return nil
}
func (p okPub) Hosts() []string                 { return p.hosts }
func (p okPub) Ping(context.Context, int) error { return nil }
func (p okPub) ValidateTopic(string) error      { return nil }
func (p okPub) Close() error                    { return nil }

// TestStatsWindow: rates are the differences between two gathers at least statsEvery apart (the first
// against the start), and polls in between get the same numbers.
func TestStatsWindow(t *testing.T) {
	reg := prometheus.NewRegistry()
	pub := publishers.NewMetrics(reg, nil).Instrument("nsq", okPub{hosts: []string{"h0:1"}})
	s := New(Options{Publishers: map[string]publishers.Publisher{"nsq": pub}, DefaultBroker: "nsq",
		Topic: "t", Topic2: "t2", MessageSize: 10, MaxMessageSize: 100, PublishTimeout: time.Second,
		AsyncLimit: 10, Registry: reg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	send := func(n int, target string) {
		for range n {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		}
	}
	find := func(st *Stats) (EndpointStats, HostStats) {
		t.Helper()
		if len(st.Brokers) != 1 || len(st.Endpoints) == 0 || st.Endpoints[0].Route != "/send1" {
			t.Fatalf("stats %+v", st)
		}
		return st.Endpoints[0], st.Brokers[0]
	}
	ctx := context.Background()
	send(8, "/send1")
	send(2, "/send1?size=0")
	t1 := s.started.Add(2 * time.Second)
	st, err := s.currentStats(ctx, t1)
	if err != nil {
		t.Fatal(err)
	}
	e, h := find(st)
	if st.WindowSeconds != 2 || e.Rate != 5 || e.RateByStatus["200"] != 4 || e.RateByStatus["400"] != 1 ||
		e.Total != 10 || e.TotalByStatus["400"] != 2 || e.Latency == nil {
		t.Errorf("first window: %+v, endpoint %+v", st, e)
	}
	if h.Host != "h0:1" || h.State != stateUp || h.Total != 8 || h.RateByResult["ok"] != 4 || h.BytesRate != 8*10/2 {
		t.Errorf("first window: host %+v", h)
	}

	send(4, "/send1")
	if st, _ := s.currentStats(ctx, t1.Add(statsEvery/2)); st.Endpoints[0].Total != 10 {
		t.Errorf("a poll within statsEvery gathered again: %+v", st.Endpoints[0])
	}
	st, _ = s.currentStats(ctx, t1.Add(statsEvery))
	e, h = find(st)
	if st.WindowSeconds != 1 || e.Rate != 4 || e.RateByStatus["400"] != 0 || e.Total != 14 || h.Rate != 4 {
		t.Errorf("second window: %+v, endpoint %+v, host %+v", st, e, h)
	}
	if st.UptimeSeconds != 3 {
		t.Errorf("uptime %v, want 3", st.UptimeSeconds)
	}
}

// TestIndexServesPage: GET / gives browsers the live page and everyone else the JSON index.
func TestIndexServesPage(t *testing.T) {
	s := New(Options{Publishers: map[string]publishers.Publisher{"nsq": okPub{hosts: []string{"h0:1"}}}, DefaultBroker: "nsq",
		Topic: "t", Topic2: "t2", MessageSize: 10, MaxMessageSize: 100, PublishTimeout: time.Second,
		AsyncLimit: 10, Registry: prometheus.NewRegistry(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, tc := range []struct {
		name, accept, wantType string
	}{
		{"browser", "text/html,application/xhtml+xml,*/*;q=0.8", "text/html; charset=utf-8"},
		{"curl", "*/*", "application/json"},
		{"json", "application/json", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Accept", tc.accept)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != tc.wantType || w.Header().Get("Vary") != "Accept" {
				t.Fatalf("status %d, Content-Type %q, Vary %q", w.Code, w.Header().Get("Content-Type"), w.Header().Get("Vary"))
			}
			isPage := w.Body.String() == string(page)
			if isPage != (tc.wantType != "application/json") {
				t.Errorf("body %.80q", w.Body)
			}
		})
	}
	// The page reads only what /stats serves and names no host outside.
	for _, want := range []string{`fetch("/stats"`, `id="endpoints"`, `id="brokers"`, `id="version"`, `id="uptime"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(string(page), "http://") || strings.Contains(string(page), "https://") {
		t.Error("the page loads something from outside mqtarget")
	}
}
