package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/publishers"
)

// TestStatsWindow: rates are the differences between two gathers at least statsEvery apart (the first
// against the start), and polls in between get the same numbers.
func TestStatsWindow(t *testing.T) {
	reg := prometheus.NewRegistry()
	pub := publishers.NewMetrics(reg, nil).Instrument("nsq", nopPub{hosts: []string{"h0:1"}})
	s := handlers.New(handlers.Options{Publishers: map[string]publishers.Publisher{"nsq": pub}, DefaultBroker: "nsq",
		Topic: "t", Topic2: "t2", MessageSize: 10, MaxMessageSize: 100, PublishTimeout: time.Second,
		AsyncLimit: 10, Registry: reg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	send := func(n int, target string) {
		for range n {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		}
	}
	find := func(st *handlers.Stats) (handlers.EndpointStats, handlers.HostStats) {
		t.Helper()
		if len(st.Brokers) != 1 || len(st.Endpoints) == 0 || st.Endpoints[0].Route != "/send1" {
			t.Fatalf("stats %+v", st)
		}
		return st.Endpoints[0], st.Brokers[0]
	}
	ctx := context.Background()
	send(8, "/send1")
	send(2, "/send1?size=0")
	t1 := s.Started().Add(2 * time.Second)
	st, err := s.StatsAt(ctx, t1)
	if err != nil {
		t.Fatal(err)
	}
	e, h := find(st)
	if st.WindowSeconds != 2 || e.Rate != 5 || e.RateByStatus["200"] != 4 || e.RateByStatus["400"] != 1 ||
		e.Total != 10 || e.TotalByStatus["400"] != 2 || e.Latency == nil {
		t.Errorf("first window: %+v, endpoint %+v", st, e)
	}
	if h.Host != "h0:1" || h.State != "up" || h.Total != 8 || h.RateByResult["ok"] != 4 || h.BytesRate != 8*10/2 {
		t.Errorf("first window: host %+v", h)
	}

	send(4, "/send1")
	if st, _ := s.StatsAt(ctx, t1.Add(time.Second/2)); st.Endpoints[0].Total != 10 {
		t.Errorf("a poll within statsEvery gathered again: %+v", st.Endpoints[0])
	}
	st, _ = s.StatsAt(ctx, t1.Add(time.Second))
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
	s := handlers.New(handlers.Options{Publishers: map[string]publishers.Publisher{"nsq": nopPub{hosts: []string{"h0:1"}}}, DefaultBroker: "nsq",
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
			isPage := strings.HasPrefix(w.Body.String(), "<!doctype html>")
			if isPage != (tc.wantType != "application/json") {
				t.Errorf("body %.80q", w.Body)
			}
			if !isPage {
				return
			}
			// The page reads only what /stats serves and loads nothing from elsewhere.
			page := w.Body.String()
			for _, want := range []string{`fetch("/stats"`, `id="endpoints"`, `id="brokers"`, `id="version"`, `id="uptime"`} {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %s", want)
				}
			}
			if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
				t.Error("the page loads something from outside mqtarget")
			}
		})
	}
}

// TestStatsFailures: failed publishes show by result on their host, their answers by status on the
// endpoint, and a host that does not answer its ping as down with the error.
func TestStatsFailures(t *testing.T) {
	f := newFake(2)
	f.pingErr = map[int]error{1: fmt.Errorf("%w: connection refused", publishers.ErrUnavailable)}
	failSync(f, fmt.Errorf("%w: broken pipe", publishers.ErrUnavailable))
	ts := newServer(t, f, func(o *handlers.Options) {
		o.Publishers = map[string]publishers.Publisher{"nsq": publishers.NewMetrics(o.Registry, nil).Instrument("nsq", f)}
	})
	for range 3 {
		if w := ts.do(http.MethodGet, "/send1", ""); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("/send1: %d %s", w.Code, w.Body)
		}
	}
	w := ts.do(http.MethodGet, "/stats", "")
	var st handlers.Stats
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != http.StatusOK {
		t.Fatalf("/stats: %d %v: %s", w.Code, err, w.Body)
	}
	if e := st.Endpoints[0]; e.Route != "/send1" || e.TotalByStatus["503"] != 3 || e.RateByStatus["503"] <= 0 {
		t.Errorf("endpoint %+v", e)
	}
	if len(st.Brokers) != 2 {
		t.Fatalf("brokers %+v", st.Brokers)
	}
	if h := st.Brokers[0]; h.State != "up" || h.TotalByResult["unavailable"] != 3 || h.RateByResult["unavailable"] <= 0 || h.TotalByResult["ok"] != 0 {
		t.Errorf("host 0: %+v", h)
	}
	if h := st.Brokers[1]; h.State != "down" || !strings.Contains(h.StateError, "connection refused") || h.Total != 0 {
		t.Errorf("host 1: %+v", h)
	}
}

// TestStatsFirstFrameIsTheLastSecond: a poll after a long quiet spell (a page opened an hour after the
// last one, or the first poll of a long-running process) shows the second after it, not the average
// since the previous gather: an endpoint busy long ago shows rate 0 beside its total, and one busy now
// shows its rate.
func TestStatsFirstFrameIsTheLastSecond(t *testing.T) {
	reg := prometheus.NewRegistry()
	pub := publishers.NewMetrics(reg, nil).Instrument("nsq", nopPub{hosts: []string{"h0:1"}})
	s := handlers.New(handlers.Options{Publishers: map[string]publishers.Publisher{"nsq": pub}, DefaultBroker: "nsq",
		Topic: "t", Topic2: "t2", MessageSize: 10, MaxMessageSize: 100, PublishTimeout: time.Second,
		AsyncLimit: 10, Registry: reg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	send := func(n int, target string) {
		for range n {
			s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
		}
	}
	send(100, "/send1") // long before anyone looks
	var wg sync.WaitGroup
	wg.Go(func() { // while the poll below waits out its second, /send2 gets busy
		time.Sleep(200 * time.Millisecond)
		send(10, "/send2")
	})
	t0 := s.Started().Add(time.Hour)
	st, err := s.StatsAt(context.Background(), t0)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string]handlers.EndpointStats{}
	for _, e := range st.Endpoints {
		rates[e.Route] = e
	}
	if st.WindowSeconds != 1 || rates["/send1"].Rate != 0 || rates["/send1"].Total != 100 || rates["/send2"].Rate != 10 {
		t.Errorf("window %vs, /send1 %+v, /send2 %+v: want the last second (0/s and 10/s)", st.WindowSeconds, rates["/send1"], rates["/send2"])
	}
}

// ctxPinger is fakePub whose Ping ends with its context, as the real publishers' do.
type ctxPinger struct{ *fakePub }

func (p ctxPinger) Ping(ctx context.Context, host int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.fakePub.Ping(ctx, host)
}

// TestStatsHostsNotTheClients: /stats pings the hosts for every poll within statsStateEvery, so a poll
// whose client has gone must not ping them under its ended context: every poll after it would show the
// hosts down for seconds (and the log would say they were unreachable).
func TestStatsHostsNotTheClients(t *testing.T) {
	f := newFake(2)
	ts := newServer(t, f, func(o *handlers.Options) { o.Publishers = map[string]publishers.Publisher{"nsq": ctxPinger{f}} })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client hung up
	ts.srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/stats", nil).WithContext(ctx))
	w := ts.do(http.MethodGet, "/stats", "")
	var st handlers.Stats
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != http.StatusOK {
		t.Fatalf("/stats: %d %v: %s", w.Code, err, w.Body)
	}
	for _, h := range st.Brokers {
		if h.State != "up" {
			t.Errorf("host %s: %s (%s) after a poll whose client had gone; want up", h.Host, h.State, h.StateError)
		}
	}
}
