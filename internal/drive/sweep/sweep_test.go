package sweep

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// TestExecute runs a small open-model sweep against a fake target that answers 503 for stomp: every file is
// written, one row per run, the 503s are not throughput, and the charts exist.
func TestExecute(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path+"?"+r.URL.RawQuery]++
		mu.Unlock()
		if r.URL.Query().Get("broker") == "stomp" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	text := []byte(`
title: Test sweep
axes:
  endpoints: [/send1]
  brokers: [nsq, stomp]
  rates: [50, 100]
  sizes: [10]
  durations: [100ms]
`)
	spec, err := Parse(text, known)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	var log bytes.Buffer
	out, err := Execute(context.Background(), spec, Options{BaseURL: srv.URL, Dir: dir, Version: "test", Log: &log, SpecText: text})
	if err != nil {
		t.Fatal(err)
	}
	results := out.Results
	if len(results) != 4 || strings.Count(log.String(), "\n") != 4 {
		t.Fatalf("%d results, log:\n%s", len(results), log.String())
	}
	mu.Lock()
	if seen["/send1?broker=nsq&size=10"] == 0 || seen["/send1?broker=stomp&size=10"] == 0 || len(seen) != 2 {
		t.Errorf("requests %v", seen)
	}
	mu.Unlock()

	f, err := os.Open(filepath.Join(dir, ResultsCSV))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 5 {
		t.Fatalf("results.csv: %d rows, %v", len(rows), err)
	}
	col := map[string]int{}
	for i, k := range rows[0] {
		col[k] = i
	}
	for _, row := range rows[1:] {
		okCount, non2xx := row[col["ok"]], row[col["non_2xx"]]
		switch row[col["broker"]] {
		case "nsq":
			if okCount == "0" || non2xx != "0" {
				t.Errorf("nsq row %v", row)
			}
		case "stomp":
			if okCount != "0" || non2xx == "0" || row[col["throughput"]] != "0" {
				t.Errorf("stomp row (all 503) %v", row)
			}
		default:
			t.Errorf("row %v", row)
		}
	}
	var js []load.Result
	b, _ := os.ReadFile(filepath.Join(dir, ResultsJSON))
	if err := json.Unmarshal(b, &js); err != nil || len(js) != 4 || js[0].Meta.Version != "test" {
		t.Fatalf("results.json: %v, %d objects", err, len(js))
	}
	summary, _ := os.ReadFile(filepath.Join(dir, Summary))
	// Drawing is slow under -race, so only the rate charts here; cmd/mqtarget's sweep test draws the
	// connections charts.
	charts := []string{"throughput-vs-rate", "latency-vs-rate"}
	for _, c := range charts {
		png, err := os.ReadFile(filepath.Join(dir, c+".png"))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%s.png: %v", c, err)
		}
		if _, err := os.Stat(filepath.Join(dir, c+".svg")); err != nil {
			t.Error(err)
		}
		if !strings.Contains(string(summary), "("+c+".png)") {
			t.Errorf("summary.md does not show %s", c)
		}
	}
	for _, want := range []string{"# Test sweep", "| /send1 | stomp | 100 req/s |", "not counted as throughput"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, summary)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, SpecCopy)); !bytes.Equal(got, text) {
		t.Error("spec.yaml is not the spec")
	}
	for _, r := range js {
		if r.NotSent != 0 || r.Service == nil || r.Lag == nil {
			t.Errorf("%s %d/s: not sent %d, service %v, lag %v", r.Meta.Broker, r.Meta.Rate, r.NotSent, r.Service, r.Lag)
		}
	}
	if strings.Contains(string(summary), "fell behind") {
		t.Errorf("summary.md says the generator fell behind, and every request was sent:\n%s", summary)
	}
}

// TestExecuteRamp: a ramp of axes.rates reaches the load run (meta.rate_to, a request rate that rises)
// and is named R:R2 in the progress line and summary.md; it is kept off the rate charts, which have one
// offered rate per point.
func TestExecuteRamp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	text := []byte("axes:\n  endpoints: [/send1]\n  rates: [20:380]\n  durations: [500ms]\n")
	spec, err := Parse(text, known)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var log bytes.Buffer
	out, err := Execute(context.Background(), spec, Options{BaseURL: srv.URL, Dir: dir, Log: &log, SpecText: text})
	if err != nil {
		t.Fatal(err)
	}
	results := out.Results
	if len(results) != 1 {
		t.Fatalf("%d results", len(results))
	}
	r := results[0]
	// A ramp from 20/s to 380/s over 0.5 s offers (20+380)/2 · 0.5 = 100 requests; a constant 20/s, 10.
	if r.Meta.Rate != 20 || r.Meta.RateTo != 380 || r.Requests < 90 || r.Requests > 110 {
		t.Errorf("rate %d, rate_to %d, %d requests: want 20, 380 and about 100", r.Meta.Rate, r.Meta.RateTo, r.Requests)
	}
	summary, _ := os.ReadFile(filepath.Join(dir, Summary))
	if !strings.Contains(log.String(), "rate=20:380/s") || !strings.Contains(string(summary), "| 20:380 req/s |") {
		t.Errorf("the ramp is not named 20:380; log %q, summary.md:\n%s", log.String(), summary)
	}
	rate := slices.IndexFunc(xAxes, func(x xAxis) bool { return x.file == "rate" })
	if _, on := xAxes[rate].take(r); on {
		t.Error("the ramp is a point of the rate charts")
	}
	constant := *r
	constant.Meta.RateTo = 0
	if _, on := xAxes[rate].take(&constant); !on {
		t.Error("a constant rate is not a point of the rate charts")
	}
}

// TestSummaryGeneratorBehind: summary.md says the generator fell behind only for a run with requests
// never sent, and that it sent late only for a run whose lag shows in the latency.
func TestSummaryGeneratorBehind(t *testing.T) {
	spec, err := Parse([]byte("axes:\n  endpoints: [/send1]\n  rates: [100, 200, 300]\n  durations: [1s]\n"), known)
	if err != nil {
		t.Fatal(err)
	}
	run := func(rate int, notSent int64, lagP99 float64, size string) *load.Result {
		r := &load.Result{Requests: 100, OK: 100, ByStatus: map[string]int64{"200": 100}, NotSent: notSent,
			Service: &load.Latency{P99: 0.5}, Lag: &load.Latency{P99: lagP99},
			Meta: load.Meta{Model: load.Open, Rate: rate, Duration: "1s", Endpoint: "/send1", Parameters: map[string]string{}}}
		if size != "" {
			r.Meta.Parameters["size"] = size
		}
		return r
	}
	dir := t.TempDir()
	// the last two differ only in size: their lines must tell them apart
	results := []*load.Result{run(100, 0, 0.05, ""), run(200, 7, 0.05, ""), run(300, 0, 4.5, ""), run(400, 3, 0.05, "10"), run(400, 5, 0.05, "1000")}
	if err := writeSummary(dir, spec, "http://127.0.0.1:1", Options{}, &Outcome{Results: results}, nil); err != nil {
		t.Fatal(err)
	}
	summary, _ := os.ReadFile(filepath.Join(dir, Summary))
	lines := map[string]string{}
	for _, l := range strings.Split(string(summary), "\n") {
		for _, point := range []string{"100 req/s", "200 req/s", "300 req/s", "400 req/s size=10", "400 req/s size=1000"} {
			if strings.HasPrefix(l, "- /send1 "+point+" 1s: ") {
				lines[point] = l
			}
		}
	}
	for point, notSent := range map[string]string{"400 req/s size=10": "3 due", "400 req/s size=1000": "5 due"} {
		if !strings.Contains(lines[point], notSent) {
			t.Errorf("%s: %q, want its own line saying %s; summary.md:\n%s", point, lines[point], notSent, summary)
		}
	}
	if _, ok := lines["100 req/s"]; ok {
		t.Errorf("a healthy run is listed: %q", lines["100 req/s"])
	}
	if !strings.Contains(lines["200 req/s"], "7 due and never sent (the generator fell behind)") || strings.Contains(lines["200 req/s"], "late") {
		t.Errorf("run with 7 not sent: %q", lines["200 req/s"])
	}
	if !strings.Contains(lines["300 req/s"], "lag p99 4.50 ms") || strings.Contains(lines["300 req/s"], "fell behind") {
		t.Errorf("run with lag: %q", lines["300 req/s"])
	}
}

// TestReplot rewrites summary.md from results.json and spec.yaml alone (two runs at one load point
// draw no chart, which keeps this test light: drawing is slow under -race).
func TestReplot(t *testing.T) {
	dir := t.TempDir()
	text := []byte("title: Again\naxes:\n  endpoints: [/send1]\n  brokers: [nsq, stomp]\n  connections: [4]\n  durations: [1s]\n")
	var results []*load.Result
	for _, b := range []string{"nsq", "stomp"} {
		r := &load.Result{Requests: 10, OK: 10, ByStatus: map[string]int64{"200": 10}, Throughput: 10,
			Meta: load.Meta{Model: load.Closed, Connections: 4, Duration: "1s", Endpoint: "/send1", Broker: b, URL: "http://127.0.0.1:1/send1?broker=" + b}}
		results = append(results, r)
	}
	js, _ := json.Marshal(results)
	if err := os.WriteFile(filepath.Join(dir, ResultsJSON), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SpecCopy), text, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Replot(dir, known)
	if err != nil || len(again.Results) != 2 {
		t.Fatalf("Replot: %v, %+v", err, again)
	}
	summary, _ := os.ReadFile(filepath.Join(dir, Summary))
	for _, want := range []string{"# Again", "`http://127.0.0.1:1`", "| /send1 | stomp | 4 conn |"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, summary)
		}
	}
	if err := os.Remove(filepath.Join(dir, ResultsJSON)); err != nil {
		t.Fatal(err)
	}
	if _, err := Replot(dir, known); err == nil {
		t.Error("no results.json: no error")
	}
}

// TestExecuteStopsOnCancel: a cancelled sweep keeps what it measured and says it was cut short.
func TestExecuteStopsOnCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	spec, err := Parse([]byte("axes:\n  endpoints: [/send1]\n  connections: [1, 2, 3]\n  durations: [1h]\n"), known)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	dir := t.TempDir()
	out, err := Execute(ctx, spec, Options{BaseURL: srv.URL, Dir: dir})
	if err == nil || len(out.Results) != 1 || !out.Results[0].Meta.Interrupted {
		t.Fatalf("err %v, %d results", err, len(out.Results))
	}
	if _, err := os.Stat(filepath.Join(dir, ResultsCSV)); err != nil {
		t.Error(err)
	}
}

// queue is a target that serves one request at a time in exactly service (a queue: 1/service requests
// per second at most; past that its queue, and so its latency, grows for as long as the load lasts).
type queue struct {
	mu   sync.Mutex
	free time.Time // when it is free to start the next request
}

func (q *queue) serve(service time.Duration) {
	q.mu.Lock()
	now := time.Now()
	if q.free.Before(now) {
		q.free = now
	}
	q.free = q.free.Add(service)
	done := q.free
	q.mu.Unlock()
	time.Sleep(time.Until(done))
}

// TestExecuteFindMax: a find_max sweep over two sizes against a target whose latency grows with the
// rate past a known knee, a queue per size: size 1 takes 16 ms a request (62.5/s at most), size 2 12 ms
// (83.3/s). Stepping from 25/s by 25 with p99 < 250 ms, size 1 meets it at 25 and 50/s and breaks at
// 75/s (its queue grows by 12.5 requests a second: 400 ms of waiting after 2 s), size 2 meets it up to
// 75/s and breaks at 100/s (16.7 a second, 12 ms each: 400 ms after 2 s). So max_rate is 50 and 75, the
// step below each knee; results.json, results.csv and summary.md carry it, and replot redraws from them.
// The margins are wide so that a busy machine's hiccups (tens of ms) do not move the answer.
func TestExecuteFindMax(t *testing.T) {
	service := map[string]time.Duration{"1": 16 * time.Millisecond, "2": 12 * time.Millisecond}
	queues := map[string]*queue{"1": {}, "2": {}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size := r.URL.Query().Get("size")
		if queues[size] == nil {
			http.Error(w, "size", http.StatusBadRequest)
			return
		}
		queues[size].serve(service[size])
	}))
	defer srv.Close()
	text := []byte(`
title: Knees
find_max:
  rate: 25
  max_rate: 500
  slo: p99<250ms
axes:
  endpoints: [/send1]
  sizes: [1, 2]
  durations: [2s]
`)
	spec, err := Parse(text, known)
	if err != nil {
		t.Fatal(err)
	}
	if spec.FindMax.Step != 25 || len(spec.Runs()) != 2 || spec.TotalDuration() != 2*20*2*time.Second {
		t.Fatalf("step %d (want find_max.rate), %d points, at most %v of load", spec.FindMax.Step, len(spec.Runs()), spec.TotalDuration())
	}
	dir := t.TempDir()
	var log bytes.Buffer
	out, err := Execute(context.Background(), spec, Options{BaseURL: srv.URL, Dir: dir, Log: &log, SpecText: text})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"1": 50, "2": 75}
	if len(out.Searches) != 2 {
		t.Fatalf("%d searches, want 2; log:\n%s", len(out.Searches), log.String())
	}
	steps := 0
	for _, fr := range out.Searches {
		size := fr.Steps[0].Result.Meta.Parameters["size"]
		last := fr.Steps[len(fr.Steps)-1]
		if fr.MaxRate != want[size] || last.Met || last.Rate != want[size]+25 || fr.Broke == "" {
			for _, s := range fr.Steps {
				t.Logf("size %s, %d/s: met %v %s, latency %+v", size, s.Rate, s.Met, s.Why, s.Result.Latency)
			}
			t.Errorf("size %s: max rate %d, want %d; last step %d/s met %v, broke %q", size, fr.MaxRate, want[size], last.Rate, last.Met, fr.Broke)
		}
		steps += len(fr.Steps)
	}
	if len(out.Results) != steps || strings.Count(log.String(), "\n") != steps+2 || !strings.Contains(log.String(), "[1/2] /send1 size=1 2s: max rate 50/s meets p99<250ms; broke at 75/s: p99 ") {
		t.Errorf("%d results of %d steps; log:\n%s", len(out.Results), steps, log.String())
	}
	if failures, total := out.Failures(); len(failures) != 0 || total != 2 {
		t.Errorf("failures %q of %d", failures, total)
	}

	// results.json: the searches as load -find-max prints them.
	var js []struct {
		MaxRate int    `json:"max_rate"`
		SLO     string `json:"slo"`
		Steps   []struct {
			Rate   int
			Met    bool
			Result load.Result
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, ResultsJSON))
	if err := json.Unmarshal(b, &js); err != nil || len(js) != 2 || js[0].MaxRate != 50 || js[1].MaxRate != 75 || js[1].SLO != "p99<250ms" ||
		len(js[1].Steps) != 4 || js[1].Steps[3].Rate != 100 || js[1].Steps[3].Met || js[1].Steps[3].Result.Meta.Parameters["size"] != "2" {
		t.Fatalf("results.json: %v, %+v", err, js)
	}
	// results.csv: a row per step, each with its search's max rate and its verdict.
	f, err := os.Open(filepath.Join(dir, ResultsCSV))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != steps+1 || !slices.Equal(rows[0], load.FindCSVHeader) {
		t.Fatalf("results.csv: %d rows, %v, header %v", len(rows), err, rows[0])
	}
	col := map[string]int{}
	for i, k := range rows[0] {
		col[k] = i
	}
	for _, row := range rows[1:] {
		wantMax := want[row[col["size"]]]
		rate, err := strconv.Atoi(row[col["rate"]])
		if err != nil || row[col["max_rate"]] != strconv.Itoa(wantMax) || row[col["met"]] != strconv.FormatBool(rate <= wantMax) {
			t.Errorf("results.csv row: max_rate %s, met %s at rate %s; want max_rate %d", row[col["max_rate"]], row[col["met"]], row[col["rate"]], wantMax)
		}
	}
	checkSummary := func(when string) {
		summary, _ := os.ReadFile(filepath.Join(dir, Summary))
		for _, want := range []string{"# Knees", "find_max: 2 searches of 2, each from 25 req/s by 25 up to 500, goal `p99<250ms`",
			"| /send1 |  | 1 | - | 2s | 50 | 3 | 75/s: p99 ", "| /send1 |  | 2 | - | 2s | 75 | 4 | 100/s: p99 ",
			"| met | /send1 |  | 50 req/s | 1 |", "| broken: p99 ", "(latency-vs-rate.png)", "(max-rate-vs-size.png)"} {
			if !strings.Contains(string(summary), want) {
				t.Errorf("%s: summary.md lacks %q:\n%s", when, want, summary)
			}
		}
		for _, c := range []string{"throughput-vs-rate", "latency-vs-rate", "max-rate-vs-size"} {
			png, err := os.ReadFile(filepath.Join(dir, c+".png"))
			if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
				t.Errorf("%s: %s.png: %v", when, c, err)
			}
		}
	}
	checkSummary("execute")
	for _, c := range []string{"throughput-vs-rate", "latency-vs-rate", "max-rate-vs-size"} {
		if err := os.Remove(filepath.Join(dir, c+".png")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, Summary)); err != nil {
		t.Fatal(err)
	}
	again, err := Replot(dir, known)
	if err != nil || len(again.Searches) != 2 || again.Searches[1].MaxRate != 75 || len(again.Results) != steps {
		t.Fatalf("Replot: %v, %+v", err, again)
	}
	checkSummary("replot")
}
