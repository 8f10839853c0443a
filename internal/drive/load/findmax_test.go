package load

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRampSchedule: a ramp from r0 to r1 over D holds (r0+r1)·D/2 requests, due in order, their rate
// at the start r0 and at the end r1; with a warm-up first at r0.
func TestRampSchedule(t *testing.T) {
	cases := []struct {
		name             string
		r0, r1           int64
		warmup, duration time.Duration
		want, warm       int64
	}{
		{"up", 100, 500, 0, 2 * time.Second, 600, 0},
		{"down", 500, 100, 0, 2 * time.Second, 600, 0},
		{"flat is no ramp", 200, 200, 0, time.Second, 200, 0},
		{"warm-up then up", 100, 300, 500 * time.Millisecond, time.Second, 50 + 200, 50},
		{"odd half", 1, 2, 0, time.Second, 2, 0}, // 1.5 requests: the second is due at 0.73 s
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSchedule(c.r0, c.r1, c.warmup, c.duration)
			if s.n != c.want || s.warm != c.warm {
				t.Fatalf("n %d warm %d, want %d and %d", s.n, s.warm, c.want, c.warm)
			}
			last := time.Duration(-1)
			for k := range s.n {
				d := s.offset(k)
				if d <= last && k > 0 || d >= c.warmup+c.duration {
					t.Fatalf("request %d due at %v after %v (run %v)", k, d, last, c.warmup+c.duration)
				}
				last = d
			}
			if s.ramp() && s.n-s.warm > 20 {
				// The local rate: the gap of two requests near the start and near the end.
				gap := func(k int64) float64 { return 1 / (s.offset(k+1) - s.offset(k)).Seconds() }
				if r := gap(s.warm); math.Abs(r-float64(c.r0))/float64(c.r0) > 0.05 {
					t.Errorf("rate at the start %.1f, want %d", r, c.r0)
				}
				if r := gap(s.n - 2); math.Abs(r-float64(c.r1))/float64(c.r1) > 0.05 {
					t.Errorf("rate at the end %.1f, want %d", r, c.r1)
				}
			}
		})
	}
}

// TestWarmupCountedApart: what is sent during -warmup reaches the target but is counted apart, in both
// models; the measured part starts when the warm-up ends.
func TestWarmupCountedApart(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	for _, o := range []Options{{Rate: 200, Warmup: 300 * time.Millisecond, Duration: 500 * time.Millisecond},
		{Connections: 2, Warmup: 100 * time.Millisecond, Duration: 100 * time.Millisecond}} {
		t.Run(o.Model(), func(t *testing.T) {
			n.Store(0)
			o.URL = srv.URL
			r, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Warmup == nil || r.Warmup.Requests == 0 || r.Warmup.OK != r.Warmup.Requests || r.Requests+r.Warmup.Requests != n.Load() {
				t.Fatalf("warm-up %+v, measured %d, the server answered %d", r.Warmup, r.Requests, n.Load())
			}
			if o.Rate > 0 && (r.Warmup.Requests != 60 || r.Requests != 100 || r.NotSent != 0) {
				t.Errorf("open model: warm-up %d, measured %d (not sent %d), want 60 and 100", r.Warmup.Requests, r.Requests, r.NotSent)
			}
			if r.Meta.Warmup != o.Warmup.String() || r.DurationS > o.Duration.Seconds()+0.5 || r.Warmup.Histogram.Count != r.Warmup.Requests {
				t.Errorf("meta warmup %q, measured duration %.3fs, warm-up histogram %d", r.Meta.Warmup, r.DurationS, r.Warmup.Histogram.Count)
			}
		})
	}
}

func TestParseSLO(t *testing.T) {
	r := &Result{Requests: 1000, OK: 995, ByStatus: map[string]int64{"200": 995, "503": 5}, Latency: Latency{P50: 1, P99: 9.5, Max: 40}}
	cases := []struct {
		slo, err string
		met      bool
		why      string
	}{
		{slo: "p99<10ms", met: true},
		{slo: "p99<9ms", why: "p99 9.500 ms, goal <9 ms"},
		{slo: "p99<=9.5ms, p50 < 2ms", met: true},
		{slo: "max<1s,errors<1%", met: true},
		{slo: "errors<0.1%", why: "errors 0.5%, goal <0.1%"},
		{slo: "p99<9500us,errors<=0.5%", why: "p99 9.500 ms, goal <9.5 ms"},
		{slo: "p99", err: "want METRIC<VALUE"},
		{slo: "p98<10ms", err: "unknown metric"},
		{slo: "p99<10", err: "needs a duration"},
		{slo: "errors<1", err: "percentage"},
		{slo: "errors<101%", err: "percentage"},
		{slo: "", err: "want METRIC<VALUE"},
	}
	for _, c := range cases {
		t.Run(c.slo, func(t *testing.T) {
			s, err := ParseSLO(c.slo)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("parse: %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			met, why := s.Check(r)
			if met != c.met || why != c.why {
				t.Errorf("check: %v %q, want %v %q", met, why, c.met, c.why)
			}
		})
	}
	s, _ := ParseSLO("p99<1s")
	if met, why := s.Check(&Result{Requests: 10, OK: 10, NotSent: 3}); met || !strings.Contains(why, "not_sent 3") {
		t.Errorf("a generator behind: %v %q", met, why)
	}
}

// TestFindMaxFindsTheKnee: a target that serves one request at a time in exactly 16 ms (a queue: 62.5
// requests/s at most; past that its queue, and so its latency, grows for as long as the load lasts:
// at 75/s by 12.5 requests a second, 400 ms of waiting after 2 s). Stepping from 25/s by 25, the goal
// p99 < 250 ms holds at 25 and 50/s and breaks at 75/s: max_rate is 50, the step below the knee. The
// margins are wide so that a busy machine's hiccups (tens of ms) do not move the answer.
func TestFindMaxFindsTheKnee(t *testing.T) {
	const service = 16 * time.Millisecond
	var mu sync.Mutex
	var free time.Time // when the server is free to start the next request
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		now := time.Now()
		if free.Before(now) {
			free = now
		}
		free = free.Add(service)
		done := free
		mu.Unlock()
		time.Sleep(time.Until(done))
	}))
	defer srv.Close()
	slo, err := ParseSLO("p99<250ms")
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	fr, err := FindMax(context.Background(), Options{URL: srv.URL, Rate: 25, Duration: 2 * time.Second},
		FindOptions{Step: 25, MaxRate: 500, SLO: slo}, func(s FindStep) { steps = append(steps, s.Rate) })
	if err != nil {
		t.Fatal(err)
	}
	if fr.MaxRate != 50 {
		for _, s := range fr.Steps {
			t.Logf("%d/s: latency %+v service %+v lag %+v", s.Rate, s.Result.Latency, *s.Result.Service, *s.Result.Lag)
		}
		t.Errorf("max rate %d, want 50; steps %v, broke %q", fr.MaxRate, steps, fr.Broke)
	}
	last := fr.Steps[len(fr.Steps)-1]
	if last.Met || last.Rate != fr.MaxRate+25 || fr.Broke == "" || len(steps) != len(fr.Steps) {
		t.Errorf("last step %d met %v, broke %q, steps %v", last.Rate, last.Met, fr.Broke, steps)
	}
	rows := fr.CSVRows()
	for i, row := range rows {
		if len(row) != len(FindCSVHeader) || row[0] != "50" || row[1] != strconv.FormatBool(fr.Steps[i].Met) || row[2+slices.Index(CSVHeader, "rate")] != strconv.Itoa(fr.Steps[i].Rate) {
			t.Errorf("CSV row %d: %v", i, row)
		}
	}
	if len(rows) != len(fr.Steps) {
		t.Errorf("%d CSV rows of %d steps", len(rows), len(fr.Steps))
	}
	var out strings.Builder
	if err := fr.WriteTable(&out); err != nil || !strings.Contains(out.String(), "max rate") {
		t.Errorf("table: %v\n%s", err, out.String())
	}
}
