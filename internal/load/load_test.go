package load

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
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
	if r.Meta.Model != Open || r.Meta.Rate != 200 {
		t.Errorf("meta %+v", r.Meta)
	}
}

func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 1000; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	got := percentiles(lat)
	want := Latency{P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000, Mean: 500.5}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if (percentiles(nil) != Latency{}) {
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

// TestOpenModelCountsNotSent: one worker and a target taking 20 ms cannot offer 200 requests/s; the
// requests that were due and never sent are counted, not dropped silently.
func TestOpenModelCountsNotSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(20 * time.Millisecond) }))
	defer srv.Close()
	r, err := Run(context.Background(), Options{URL: srv.URL, Rate: 200, MaxWorkers: 1, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.NotSent == 0 || r.Requests+r.NotSent != 60 {
		t.Errorf("requests %d + not sent %d, want 60 due", r.Requests, r.NotSent)
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

	got := Describe(context.Background(), mq.Client(), mq.URL+"/send1?size=3")
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
	if got := Describe(context.Background(), other.Client(), other.URL+"/x"); got != nil {
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
