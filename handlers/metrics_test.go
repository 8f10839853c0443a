package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mqtarget/mqtarget/handlers"
)

// gather returns the metric family called name, failing the test when it is absent.
func gather(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("metric %s not gathered", name)
	return nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

func TestHTTPMetrics(t *testing.T) {
	ts := newServer(t, newFake(3))
	requests := []struct {
		method, target string
		status         int
	}{
		{"GET", "/send1?size=50", 200},
		{"GET", "/send1?topic=x&size=60", 200},
		{"POST", "/send1", 200},
		{"GET", "/send1?size=0", 400},
		{"GET", "/sendAsync", 202},
		{"GET", "/sendAsync?topics=3", 202},
		{"GET", "/send2Host?topics=2", 200},
		{"GET", "/healthz", 200},
		{"GET", "/nope?x=1", 404},
	}
	for _, r := range requests {
		if w := ts.do(r.method, r.target, ""); w.Code != r.status {
			t.Fatalf("%s %s: status %d, want %d", r.method, r.target, w.Code, r.status)
		}
	}

	mf := gather(t, ts.reg, "mqtarget_http_request_duration_seconds")
	if mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("type %v", mf.GetType())
	}
	got := map[string]uint64{}
	for _, m := range mf.GetMetric() {
		l := labels(m)
		if len(l) != 3 {
			t.Errorf("labels %v, want route, method, code", l)
		}
		got[l["route"]+" "+l["method"]+" "+l["code"]] += m.GetHistogram().GetSampleCount()
	}
	want := map[string]uint64{
		"/send1 get 200":     2,
		"/send1 post 200":    1,
		"/send1 get 400":     1,
		"/sendAsync get 202": 2,
		"/send2Host get 200": 1, // the route, not the query
		"/healthz get 200":   1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d observations, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(want) {
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Errorf("unexpected series %v; raw paths or 404s must not become labels", keys)
	}

	waitFor(t, "async completions", func() bool { return asyncCount(t, ts.reg, "acked") == 2 })
	for result, want := range map[string]float64{"accepted": 2, "acked": 2, "rejected": 0, "failed": 0} {
		if got := asyncCount(t, ts.reg, result); got != want {
			t.Errorf("mqtarget_async_messages_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	if g := gather(t, ts.reg, "mqtarget_async_in_flight_limit").GetMetric()[0].GetGauge().GetValue(); g != 100 {
		t.Errorf("async limit gauge %v", g)
	}
	if g := gather(t, ts.reg, "mqtarget_async_in_flight").GetMetric()[0].GetGauge().GetValue(); g != 0 {
		t.Errorf("async in flight gauge %v", g)
	}

	w := ts.do("GET", "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("/metrics: %d", w.Code)
	}
	for _, s := range []string{`mqtarget_http_request_duration_seconds_count{code="200",method="get",route="/send1"} 2`, `mqtarget_async_messages_total{result="accepted"} 2`} {
		if !strings.Contains(w.Body.String(), s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
}

func asyncCount(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	for _, m := range gather(t, reg, "mqtarget_async_messages_total").GetMetric() {
		if labels(m)["result"] == result {
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no mqtarget_async_messages_total{result=%q}", result)
	return 0
}

func TestAsyncMetricsRejectedAndFailed(t *testing.T) {
	f := newFake(1)
	f.async = asyncHold
	ts := newServer(t, f, func(o *handlers.Options) { o.AsyncLimit = 1 })
	codes := []int{}
	for range 3 {
		codes = append(codes, ts.do("GET", "/sendAsync", "").Code)
	}
	if codes[0] != 202 || codes[1] != 429 || codes[2] != 429 {
		t.Fatalf("codes %v", codes)
	}
	if g := gather(t, ts.reg, "mqtarget_async_in_flight").GetMetric()[0].GetGauge().GetValue(); g != 1 {
		t.Errorf("in flight gauge %v, want 1", g)
	}
	f.release(context.DeadlineExceeded)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ts.srv.DrainAsync(ctx)
	for result, want := range map[string]float64{"accepted": 1, "acked": 0, "rejected": 2, "failed": 1} {
		if got := asyncCount(t, ts.reg, result); got != want {
			t.Errorf("mqtarget_async_messages_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// TestHTTPMetricsLabels: the hand-made HTTP instrumentation labels as promhttp did (lower-case method,
// the final status code, the route pattern), for every way a request is answered: a handler's own
// status, a refusal before the handler (401, 503), a client gone (499), a HEAD, a route that never
// calls WriteHeader, and paths the exact-route table must leave to chi (404, 405, an escaped path).
func TestHTTPMetricsLabels(t *testing.T) {
	for _, tc := range []struct {
		name, method, target string
		header               map[string]string
		mods                 func(*handlers.Options)
		cancel               bool // the client has left before the request is served
		status               int
		series               string // route method code; "" when no series may appear
	}{
		{name: "sync ok", method: "GET", target: "/send1", status: 200, series: "/send1 get 200"},
		{name: "post", method: "POST", target: "/send2", status: 200, series: "/send2 post 200"},
		{name: "async accepted", method: "GET", target: "/sendAsync", status: 202, series: "/sendAsync get 202"},
		{name: "bad parameter", method: "GET", target: "/send1?size=x", status: 400, series: "/send1 get 400"},
		{name: "no token", method: "GET", target: "/send1", mods: func(o *handlers.Options) { o.AuthToken = "s3cret" },
			status: 401, series: "/send1 get 401"},
		{name: "token", method: "GET", target: "/send1", header: map[string]string{"Authorization": "Bearer s3cret"},
			mods: func(o *handlers.Options) { o.AuthToken = "s3cret" }, status: 200, series: "/send1 get 200"},
		{name: "client gone", method: "GET", target: "/send1", cancel: true, status: handlers.StatusClientClosedRequest,
			series: "/send1 get 499"},
		{name: "healthz head", method: "HEAD", target: "/healthz", status: 200, series: "/healthz head 200"},
		{name: "readyz", method: "GET", target: "/readyz", status: 200, series: "/readyz get 200"},
		{name: "wrong method", method: "PUT", target: "/send1", status: 405},
		{name: "trailing slash", method: "GET", target: "/send1/", status: 404},
		{name: "escaped path", method: "GET", target: "/send%31", status: 404},
		{name: "other case", method: "GET", target: "/SEND1", status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mods []func(*handlers.Options)
			if tc.mods != nil {
				mods = append(mods, tc.mods)
			}
			ts := newServer(t, newFake(3), mods...)
			r := httptest.NewRequest(tc.method, tc.target, nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			if tc.cancel {
				ctx, cancel := context.WithCancel(r.Context())
				cancel()
				r = r.WithContext(ctx)
			}
			w := httptest.NewRecorder()
			ts.srv.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			mfs, err := ts.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mf := range mfs {
				if mf.GetName() != "mqtarget_http_request_duration_seconds" {
					continue // absent when no route was served
				}
				for _, m := range mf.GetMetric() {
					l := labels(m)
					got = append(got, fmt.Sprintf("%s %s %s:%d", l["route"], l["method"], l["code"], m.GetHistogram().GetSampleCount()))
				}
			}
			var want []string
			if tc.series != "" {
				want = []string{tc.series + ":1"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("series %v, want %v", got, want)
			}
		})
	}
}

// TestHTTPRequestsInFlight: the in-flight gauge counts a request while its handler runs, and not after.
func TestHTTPRequestsInFlight(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	ts := newServer(t, f)
	inFlight := func() float64 {
		return gather(t, ts.reg, "mqtarget_http_requests_in_flight").GetMetric()[0].GetGauge().GetValue()
	}
	done := make(chan int)
	go func() { done <- ts.do(http.MethodGet, "/send1", "").Code }()
	waitFor(t, "the publish held", func() bool { return len(f.Calls()) == 1 })
	if n := inFlight(); n != 1 {
		t.Errorf("in flight while held: %v, want 1", n)
	}
	close(f.gate)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if n := inFlight(); n != 0 {
		t.Errorf("in flight after: %v, want 0", n)
	}
}
