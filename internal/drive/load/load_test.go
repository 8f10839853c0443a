package load

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStatusCounting: a server answering 200, 400 and 503 in turn; the result's by_status matches what
// the server sent exactly, ok counts only the 200s, and throughput is ok per second.
// TestParseRate: -rate and a sweep's axes.rates read R and R:R2 alike; bounds are Validate's.
func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		from, to int
		ok       bool
	}{
		{"constant", "2000", 2000, 0, true},
		{"ramp", "100:5000", 100, 5000, true},
		{"ramp down", "5000:100", 5000, 100, true},
		{"negative, for Validate to name", "-5", -5, 0, true},
		{"ramp end 0", "100:0", 0, 0, false},
		{"ramp end missing", "100:", 0, 0, false},
		{"not a number", "many", 0, 0, false},
		{"fraction", "1.5", 0, 0, false},
		{"two colons", "1:2:3", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to, err := ParseRate(tc.in)
			if (err == nil) != tc.ok || from != tc.from || to != tc.to {
				t.Errorf("ParseRate(%q) = %d, %d, %v; want %d, %d, ok %v", tc.in, from, to, err, tc.from, tc.to, tc.ok)
			}
		})
	}
}

func TestStatusCounting(t *testing.T) {
	codes := []int{200, 400, 503, 200, 200}
	var n atomic.Int64
	var mu sync.Mutex
	sent := map[int]int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := codes[int(n.Add(1)-1)%len(codes)]
		mu.Lock()
		sent[code]++
		mu.Unlock()
		w.WriteHeader(code)
	}))
	defer srv.Close()
	r, err := Run(context.Background(), Options{URL: srv.URL + "/send1?size=10", Connections: 2, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if r.Requests != n.Load() || r.Errors != 0 {
		t.Fatalf("requests %d errors %d, the server answered %d", r.Requests, r.Errors, n.Load())
	}
	for _, code := range []int{200, 400, 503} {
		if got := r.ByStatus[strconv.Itoa(code)]; got != sent[code] || got == 0 {
			t.Errorf("by_status[%d] = %d, the server sent %d", code, got, sent[code])
		}
	}
	if r.OK != sent[200] || r.NonOK() != sent[400]+sent[503] {
		t.Errorf("ok %d non-2xx %d, sent %v", r.OK, r.NonOK(), sent)
	}
	if want := float64(sent[200]) / r.DurationS; r.Throughput != want {
		t.Errorf("throughput %v, want 2xx/s = %v", r.Throughput, want)
	}
	if r.Meta.Model != Closed || r.Meta.Connections != 2 || r.Meta.Endpoint != "/send1" || r.Meta.Parameters["size"] != "10" {
		t.Errorf("meta %+v", r.Meta)
	}
}

// TestTransportErrors: nothing listens, so every request is an error and none is ok.
func TestTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r, err := Run(context.Background(), Options{URL: "http://" + addr + "/send1", Connections: 1, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Errors != r.Requests || r.OK != 0 || len(r.ByStatus) != 0 || r.Throughput != 0 || len(r.ErrorKinds) == 0 {
		t.Errorf("result %+v", r)
	}
}

// TestOpenModelShowsStall: the target stalls every request for 300 ms once, and one worker sends, so
// the requests due during the stall go out late. From their intended send times their latencies reach
// back to the stall (p99 and max); measured from the actual send only one request would be slow.
func TestOpenModelShowsStall(t *testing.T) {
	const stall = 300 * time.Millisecond
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 20 {
			time.Sleep(stall)
		}
	}))
	defer srv.Close()
	r, err := Run(context.Background(), Options{URL: srv.URL, Rate: 200, MaxWorkers: 1, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != r.Requests || r.Requests < 100 {
		t.Fatalf("result %+v", r)
	}
	if r.Latency.Max < ms(stall) || r.Latency.P99 < ms(stall/2) {
		t.Errorf("latency %+v: the %v stall does not show in p99 and max", r.Latency, stall)
	}
	// From the actual send only the stalled request was slow; the others waited for the one worker, which
	// is the lag.
	if r.Service == nil || r.Lag == nil || r.Service.Max < ms(stall) || r.Service.P90 > ms(stall/2) || r.Lag.P99 < ms(stall/2) {
		t.Errorf("service %+v lag %+v: want one slow service time and the wait for the worker as lag", r.Service, r.Lag)
	}
	if r.Meta.Model != Open || r.Meta.Rate != 200 {
		t.Errorf("meta %+v", r.Meta)
	}
}

// TestHistogram: percentiles by the nearest rank, exact to the microsecond below 2 ms and within 0.05 %
// above, with exact max and mean; nothing recorded is all zero.
func TestHistogram(t *testing.T) {
	cases := []struct {
		name string
		unit time.Duration
		want Latency
		tol  float64 // relative
	}{
		{"microseconds, exact", time.Microsecond, Latency{P50: 0.5, P90: 0.9, P99: 0.99, P999: 0.999, Max: 1, Mean: 0.501}, 0},
		{"milliseconds, bucketed", time.Millisecond, Latency{P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000, Mean: 500.5}, 0.0005},
		{"minutes", time.Minute, Latency{P50: 500 * 6e4, P90: 900 * 6e4, P99: 990 * 6e4, P999: 999 * 6e4, Max: 1000 * 6e4, Mean: 500.5 * 6e4}, 0.0005},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h histogram
			for i := 1000; i >= 1; i-- {
				h.add(time.Duration(i) * c.unit)
			}
			got := h.latency()
			near := func(g, w float64) bool { return g >= w*(1-c.tol)-0.001 && g <= w*(1+c.tol)+0.001 }
			if !near(got.P50, c.want.P50) || !near(got.P90, c.want.P90) || !near(got.P99, c.want.P99) || !near(got.P999, c.want.P999) ||
				got.Max != c.want.Max || !near(got.Mean, c.want.Mean) {
				t.Errorf("got %+v, want %+v (±%g)", got, c.want, c.tol)
			}
			if len(h.counts) > 40000 {
				t.Errorf("%d buckets", len(h.counts))
			}
		})
	}
	var h histogram
	if h.latency() != (Latency{}) {
		t.Error("no samples: not zero")
	}
}

func TestValidate(t *testing.T) {
	ok := Options{URL: "http://127.0.0.1:1/send1", Rate: 10, Duration: time.Second}
	cases := []struct {
		name string
		mod  func(*Options)
		want string // "" valid
	}{
		{"valid", func(*Options) {}, ""},
		{"closed", func(o *Options) { o.Rate, o.Connections = 0, 4 }, ""},
		{"both", func(o *Options) { o.Connections = 4 }, "-rate and -connections"},
		{"neither", func(o *Options) { o.Rate = 0 }, "-rate or -connections"},
		{"negative rate", func(o *Options) { o.Rate = -1 }, "-rate"},
		{"negative connections", func(o *Options) { o.Rate, o.Connections = 0, -1 }, "-connections"},
		{"duration", func(o *Options) { o.Duration = 0 }, "-duration"},
		{"timeout", func(o *Options) { o.Timeout = -time.Second }, "-timeout"},
		{"max workers", func(o *Options) { o.MaxWorkers = -1 }, "-max-workers"},
		{"method", func(o *Options) { o.Method = "DELETE" }, "-method"},
		{"rate too high", func(o *Options) { o.Rate = MaxRate + 1 }, "-rate: must be 1..1000000"},
		{"connections too many", func(o *Options) { o.Rate, o.Connections = 0, MaxConnections+1 }, "-connections: must be 1..10000"},
		{"max workers too many", func(o *Options) { o.MaxWorkers = 1 << 62 }, "-max-workers: must be 0..100000"},
		{"duration too long", func(o *Options) { o.Duration = 1000 * time.Hour }, "-duration: must be > 0 and <= 24h0m0s"},
		{"timeout too long", func(o *Options) { o.Timeout = time.Hour }, "-timeout: must be > 0 and <= 10m0s"},
		{"body too large", func(o *Options) { o.Body = make([]byte, MaxBodyBytes+1) }, "-body: at most 67108864 bytes"},
		{"largest", func(o *Options) {
			o.Rate, o.Duration, o.MaxWorkers, o.Timeout = MaxRate, MaxDuration, MaxWorkers, MaxTimeout
		}, ""},
		{"scheme", func(o *Options) { o.URL = "ftp://127.0.0.1/x" }, "URL"},
		{"no host", func(o *Options) { o.URL = "http:///send1" }, "URL"},
		{"relative", func(o *Options) { o.URL = "/send1" }, "URL"},
		{"fragment", func(o *Options) { o.URL = "http://127.0.0.1:1/send1#x" }, "URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok
			c.mod(&o)
			err := o.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("valid options refused: %v", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
				t.Errorf("error %v, want one naming %s", err, c.want)
			}
		})
	}
}

func sample() *Result {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &Result{Requests: 10, OK: 7, ByStatus: map[string]int64{"200": 7, "503": 2}, Errors: 1,
		ErrorKinds: map[string]int64{"connection refused": 1}, Throughput: 3.5, DurationS: 2,
		Latency: Latency{P50: 1, P90: 2, P99: 3, P999: 4, Max: 5, Mean: 1.5},
		Meta: Meta{Version: "v1", Cores: 2, Model: Closed, Connections: 4, Duration: "2s", Method: "GET", Start: start, End: start.Add(2 * time.Second),
			Target: &Target{Version: "v9", DefaultBroker: "nsq", Config: map[string]any{"topic": "t"},
				Brokers: map[string]any{"nsq": map[string]any{"version": "nsqd v1.3.0"}}}}}
	r.Meta.setEndpoint("http://u:pw@127.0.0.1:8080/send1?size=100&topics=3")
	return r
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sample().Write(&b, "json"); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"requests", "ok", "by_status", "errors", "throughput", "latency_ms", "meta"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, b.String())
		}
	}
	lat := m["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("no latency_ms.%s", k)
		}
	}
	meta := m["meta"].(map[string]any)
	for _, k := range []string{"version", "cores", "model", "connections", "duration", "endpoint", "parameters", "broker", "start", "end", "target"} {
		if _, ok := meta[k]; !ok {
			t.Errorf("no meta.%s in %s", k, b.String())
		}
	}
	if m["by_status"].(map[string]any)["503"] != 2.0 || meta["broker"] != "nsq" || meta["broker_version"] != "nsqd v1.3.0" || meta["endpoint"] != "/send1" {
		t.Errorf("json %s", b.String())
	}
	if strings.Contains(b.String(), "pw@") {
		t.Errorf("the URL's password is in the result: %s", b.String())
	}
}

func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	if err := sample().Write(&b, "csv"); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0]) != len(rows[1]) {
		t.Fatalf("rows %q", rows)
	}
	got := map[string]string{}
	for i, k := range rows[0] {
		got[k] = rows[1][i]
	}
	want := map[string]string{"endpoint": "/send1", "broker": "nsq", "model": "closed", "connections": "4", "size": "100", "topics": "3",
		"requests": "10", "ok": "7", "non_2xx": "2", "errors": "1", "throughput": "3.5", "p999_ms": "4", "by_status": "200:7 503:2"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := sample().Write(&b, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ok (2xx)", "7", "200:7 503:2", "3.5 2xx/s", "p99.9 4.000", "mqtarget v9", "1 × connection refused"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if err := sample().Write(&b, "xml"); err == nil {
		t.Error("xml: no error")
	}
}

// TestOpenModelCountsNotSent: one worker and a target taking 200 ms cannot offer 200 requests/s; the
// requests that were due and still not sent a second after the end are counted, not dropped silently.
func TestOpenModelCountsNotSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(200 * time.Millisecond) }))
	defer srv.Close()
	r, err := Run(context.Background(), Options{URL: srv.URL, Rate: 200, MaxWorkers: 1, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.NotSent == 0 || r.Requests+r.NotSent != 60 {
		t.Errorf("requests %d + not sent %d, want 60 due", r.Requests, r.NotSent)
	}
}

// TestOpenModelSendsEveryDueRequest: a healthy run sends every request due within the duration (the
// last ones a little late are still sent), so not_sent is 0, and the three latencies are consistent:
// latency from the due time is at least the service time, the lag is small.
func TestOpenModelSendsEveryDueRequest(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	for _, c := range []struct {
		rate     int
		duration time.Duration
		want     int64
	}{{200, 500 * time.Millisecond, 100}, {3, 1001 * time.Millisecond, 4}, {1000, 250 * time.Millisecond, 250}} {
		n.Store(0)
		r, err := Run(context.Background(), Options{URL: srv.URL, Rate: c.rate, Duration: c.duration})
		if err != nil {
			t.Fatal(err)
		}
		if r.NotSent != 0 || r.Requests != c.want || n.Load() != c.want || r.OK != c.want {
			t.Errorf("rate %d for %v: requests %d (server saw %d), ok %d, not sent %d, want %d sent", c.rate, c.duration,
				r.Requests, n.Load(), r.OK, r.NotSent, c.want)
		}
		if r.Service == nil || r.Lag == nil || r.Latency.Max < r.Service.Max || r.Latency.P50 < r.Service.P50 {
			t.Errorf("rate %d: latency %+v service %+v lag %+v", c.rate, r.Latency, r.Service, r.Lag)
		}
	}
}

// TestProgressAndCancel: the progress callback sees the counts growing, and a cancelled run stops
// early, says so, and keeps what it measured.
func TestProgressAndCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls []Progress
	r, err := Run(ctx, Options{URL: srv.URL, Connections: 1, Duration: time.Hour, Progress: func(p Progress) {
		calls = append(calls, p) // Run's own goroutine calls it, one call at a time
		cancel()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Requests == 0 || calls[0].Duration != time.Hour || calls[0].Elapsed < time.Second {
		t.Errorf("progress %+v", calls)
	}
	if !r.Meta.Interrupted || r.OK < calls[0].OK || r.DurationS > 30 {
		t.Errorf("result after cancel: interrupted %v, ok %d, %.1fs", r.Meta.Interrupted, r.OK, r.DurationS)
	}
}

func TestDescribe(t *testing.T) {
	mq := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/json" {
			w.Write([]byte("<html>"))
			return
		}
		switch r.URL.Path {
		case "/":
			w.Write([]byte(`{"endpoints":[{"path":"/send1"}],"default_broker":"stomp","setup":{"stomp":{"embedded":false}},` +
				`"brokers":{"stomp":{"hosts":["a:1","b:1"],"versions":["","ActiveMQ/5.17.2"]}}}`))
		case "/config":
			w.Write([]byte(`{"version":{"version":"v1.2.3","revision":"abc","go_version":"go1.26"},"config":{"topic":"t","stomp":{"passcode":"<redacted>"}}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer mq.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"hello":1}`)) }))
	defer other.Close()

	got := Describe(context.Background(), mq.URL+"/send1?size=3")
	if got == nil || got.Version != "v1.2.3" || got.Revision != "abc" || got.GoVersion != "go1.26" || got.DefaultBroker != "stomp" ||
		got.Config["topic"] != "t" || got.Brokers["stomp"] == nil {
		t.Errorf("mqtarget described as %+v", got)
	}
	// An external broker: the version its connected host told (the first host has not connected yet).
	m := Meta{Target: got}
	m.setEndpoint(mq.URL + "/send1")
	if m.Broker != "stomp" || m.BrokerVersion != "ActiveMQ/5.17.2" {
		t.Errorf("meta broker %q version %q, want stomp ActiveMQ/5.17.2", m.Broker, m.BrokerVersion)
	}
	if got := Describe(context.Background(), other.URL+"/x"); got != nil {
		t.Errorf("another server described as a mqtarget: %+v", got)
	}
}

// TestRunLeavesNoConnections: the run's connections are closed when it returns, while the target still
// runs, so a sweep of many runs does not pile them up.
func TestRunLeavesNoConnections(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	before := goleak.IgnoreCurrent()
	for _, o := range []Options{{Connections: 4}, {Rate: 200}} {
		o.URL, o.Duration = srv.URL, 100*time.Millisecond
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	goleak.VerifyNone(t, before)
}

// TestErrorBodies: a target answering 400 with varying texts and 503 with one: up to 3 distinct bodies
// of each status are kept, cut to one short line (a newline in a body cannot forge a table line).
func TestErrorBodies(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		switch i % 3 {
		case 0:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("broker down\n"))
		case 1:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "{\"error\":\"bad size %d\"}\nforged line", i%4)
		default:
			w.WriteHeader(http.StatusBadRequest)
			w.Write(bytes.Repeat([]byte("x"), 10000))
		}
	}))
	defer srv.Close()
	r, err := Run(context.Background(), Options{URL: srv.URL, Connections: 2, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 0 || r.Requests < 20 {
		t.Fatalf("result %+v", r)
	}
	if got := r.ErrorBodies["503"]; len(got) != 1 || got[0] != "broker down" {
		t.Errorf("503 bodies %q", got)
	}
	b400 := r.ErrorBodies["400"]
	if len(b400) != samplesPerStatus {
		t.Fatalf("400 bodies %q, want %d", b400, samplesPerStatus)
	}
	for _, b := range b400 {
		if strings.ContainsAny(b, "\n\r") || len(b) > sampleBytes+len(" …") {
			t.Errorf("body %q: more than one short line", b)
		}
	}
	var out bytes.Buffer
	if err := r.Write(&out, "table"); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^  503 said +"broker down"$`).MatchString(out.String()) || strings.Contains(out.String(), "\nforged") {
		t.Errorf("table:\n%s", out.String())
	}
	if err := r.Check(DefaultMaxErrorRate); err == nil || !strings.Contains(err.Error(), "no 2xx answer") {
		t.Errorf("check: %v", err)
	}
}

// TestCheck: a run fails with no 2xx answer, or with more non-2xx answers and transport errors than the
// allowed share of the requests.
func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		r    Result
		max  float64
		want string // "" passes
	}{
		{"all ok", Result{Requests: 100, OK: 100, ByStatus: map[string]int64{"200": 100}}, 0.01, ""},
		{"at the limit", Result{Requests: 100, OK: 99, ByStatus: map[string]int64{"200": 99, "503": 1}}, 0.01, ""},
		{"over the limit", Result{Requests: 100, OK: 97, ByStatus: map[string]int64{"200": 97, "503": 2}, Errors: 1}, 0.01,
			"3.00% of the requests failed, more than -max-error-rate 1%: 2 × 503, 1 without an answer"},
		{"limit 1 allows errors", Result{Requests: 100, OK: 1, ByStatus: map[string]int64{"200": 1, "503": 99}}, 1, ""},
		{"no 2xx", Result{Requests: 10, ByStatus: map[string]int64{"400": 10}}, 1, "no 2xx answer: 10 × 400"},
		{"refused", Result{Requests: 10, Errors: 10}, 1, "no 2xx answer: 10 without an answer"},
		{"nothing sent", Result{}, 1, "no request was sent"},
		{"redirects are not ok", Result{Requests: 5, ByStatus: map[string]int64{"302": 5}}, 1, "no 2xx answer: 5 × 302"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Check(c.max)
			if c.want == "" && err != nil || c.want != "" && (err == nil || err.Error() != c.want) {
				t.Errorf("check: %v, want %q", err, c.want)
			}
		})
	}
}

// TestNoProxyFromEnvironment: with HTTP_PROXY set to a listener that counts, Describe and both models
// send to the URL's host only. net/http reads the proxy variables once per process, so the test runs
// itself in a child process whose environment has them from the start. 0.0.0.0 is a host net/http
// would proxy (loopback names and addresses never are) and reaches the local target all the same.
func TestNoProxyFromEnvironment(t *testing.T) {
	if os.Getenv("MQTARGET_TEST_PROXY_CHILD") == "" {
		var proxied atomic.Int64
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			proxied.Add(1)
			w.WriteHeader(http.StatusBadGateway)
		}))
		defer proxy.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoProxyFromEnvironment$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MQTARGET_TEST_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL,
			"NO_PROXY=", "no_proxy=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("child: %v\n%s", err, out)
		}
		if n := proxied.Load(); n != 0 {
			t.Errorf("%d requests went to the proxy from the environment", n)
		}
		return
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/" {
			w.Write([]byte(`{"endpoints":[]}`))
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	u := "http://0.0.0.0:" + port + "/send1"
	if Describe(context.Background(), u) == nil {
		t.Error("the target was not asked")
	}
	for _, o := range []Options{{Connections: 1}, {Rate: 100}} {
		o.URL, o.Duration = u, 50*time.Millisecond
		r, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK == 0 || r.OK != r.Requests {
			t.Errorf("%s model: %d requests, %d ok, by status %v, errors %v", r.Meta.Model, r.Requests, r.OK, r.ByStatus, r.ErrorKinds)
		}
	}
	if hits.Load() == 0 {
		t.Error("nothing arrived at the target")
	}
}

// TestErrorKindsAreShort: a target answering a status line of 100 KB (Go's error quotes it) gives an
// error kind of one short line.
func TestErrorKindsAreShort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close() // before the wait: it ends the accept loop
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = c.Read(make([]byte, 4096))
				_, _ = c.Write([]byte("HTTP/1.1 2" + strings.Repeat("x\x1b[2J", 20000) + "\r\n\r\n"))
			})
		}
	})
	r, err := Run(context.Background(), Options{URL: "http://" + ln.Addr().String() + "/", Connections: 1, Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors == 0 || len(r.ErrorKinds) == 0 {
		t.Fatalf("result %+v", r)
	}
	for k := range r.ErrorKinds {
		if len(k) > sampleBytes+len(" …") || strings.ContainsAny(k, "\x1b\r\n") {
			t.Errorf("error kind of %d bytes: %.80q…", len(k), k)
		}
	}
}

// TestErrorKindsWithoutAddresses: a target that never answers times every connection out; the kind
// names the failure, not each connection's own port (which would make every error a kind of its own).
func TestErrorKindsWithoutAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	})
	r, err := Run(context.Background(), Options{URL: "http://" + ln.Addr().String() + "/", Connections: 4, Duration: 100 * time.Millisecond, Timeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 4 || len(r.ErrorKinds) != 1 || r.ErrorKinds["read: i/o timeout"] != 4 {
		t.Errorf("errors %d by kind %v: want 4 × \"read: i/o timeout\"", r.Errors, r.ErrorKinds)
	}
}
