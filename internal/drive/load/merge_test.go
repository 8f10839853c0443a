package load

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMergeEqualsOneGenerator: samples spread over three recorders (three shards) and merged give the
// percentiles one recorder of every sample gives, and those lie within the documented precision of the
// exact percentiles of the samples (nearest rank): 1 µs below 2 ms, 0.05 % above.
func TestMergeEqualsOneGenerator(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []time.Duration
	var one recorder
	parts := []*recorder{{}, {}, {}}
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 30000 {
		// A log-normal spread from tens of µs to hundreds of ms, and a few errors and 503s.
		d := time.Duration(math.Exp(rng.NormFloat64()*1.5+math.Log(800e3)) + 1)
		all = append(all, d)
		code := 200
		if i%97 == 0 {
			code = 503
		}
		due := start.Add(time.Duration(i) * time.Millisecond)
		one.add(code, "", "", due, due, due.Add(d))
		parts[i%3].add(code, "", "", due, due, due.Add(d))
		if i%1000 == 0 {
			parts[i%3].add(0, "connection refused", "", due, due, due)
			one.add(0, "connection refused", "", due, due, due)
		}
	}
	var rs []*Result
	for i, p := range parts {
		r := p.result(time.Second, true)
		r.Meta = Meta{Model: Open, Rate: 3000, Shard: []string{"0/3", "1/3", "2/3"}[i], Start: start, End: start.Add(30 * time.Second), URL: "http://x/send1", Method: "GET"}
		rs = append(rs, r)
	}
	m, err := Merge(rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := one.result(30*time.Second, true)
	if m.Requests != want.Requests || m.OK != want.OK || m.Errors != want.Errors || m.ByStatus["503"] != want.ByStatus["503"] ||
		m.ErrorKinds["connection refused"] != want.ErrorKinds["connection refused"] {
		t.Errorf("merged counts %d/%d/%d %v %v, one recorder %d/%d/%d %v %v", m.Requests, m.OK, m.Errors, m.ByStatus, m.ErrorKinds,
			want.Requests, want.OK, want.Errors, want.ByStatus, want.ErrorKinds)
	}
	if m.Latency != want.Latency || *m.Service != *want.Service || *m.Lag != *want.Lag {
		t.Errorf("merged latency %+v, one recorder %+v", m.Latency, want.Latency)
	}
	if !slices.Equal(m.Meta.Shards, []string{"0/3", "1/3", "2/3"}) || m.Meta.Rate != 3000 || m.DurationS != 30 || m.Throughput != float64(m.OK)/30 {
		t.Errorf("merged meta %+v, duration %v, throughput %v", m.Meta, m.DurationS, m.Throughput)
	}
	slices.Sort(all)
	for _, c := range []struct {
		name string
		q    float64
		got  float64
	}{{"p50", 0.50, m.Latency.P50}, {"p90", 0.90, m.Latency.P90}, {"p99", 0.99, m.Latency.P99}, {"p99.9", 0.999, m.Latency.P999}} {
		exact := all[int(math.Ceil(c.q*float64(len(all))))-1]
		exactMS := float64(exact) / 1e6
		tol := max(0.0005*exactMS, 0.001) // 0.05 %, or 1 µs below 2 ms
		if math.Abs(c.got-exactMS) > tol+1e-9 {
			t.Errorf("%s: merged %.4f ms, exact %.4f ms: more than %.4f ms apart", c.name, c.got, exactMS, tol)
		}
	}
}

// TestMergeRefuses: results that are not one load, shards missing or twice, and files whose counts do
// not add up are refused with an error naming the file.
func TestMergeRefuses(t *testing.T) {
	mk := func(shard string, mod func(*Result)) *Result {
		var rec recorder
		now := time.Now()
		rec.add(200, "", "", now, now, now.Add(time.Millisecond))
		r := rec.result(time.Second, false)
		r.Meta = Meta{Model: Closed, Connections: 2, Shard: shard, Start: now, End: now.Add(time.Second), URL: "http://x/send1", Method: "GET"}
		if mod != nil {
			mod(r)
		}
		return r
	}
	cases := []struct {
		name string
		rs   []*Result
		want string
	}{
		{"shard missing", []*Result{mk("0/3", nil), mk("2/3", nil)}, "shard 1/3 missing"},
		{"shard twice", []*Result{mk("0/2", nil), mk("0/2", nil)}, "b.json: shard 0/2 given twice"},
		{"shards of different runs", []*Result{mk("0/2", nil), mk("1/3", nil)}, "b.json is shard 1/3, a.json one of 2 shards"},
		{"shard and no shard", []*Result{mk("0/2", nil), mk("", nil)}, "b.json is no shard"},
		{"another url", []*Result{mk("", nil), mk("", func(r *Result) { r.Meta.URL = "http://x/send2" })}, "not one load"},
		{"another model", []*Result{mk("", nil), mk("", func(r *Result) { r.Meta.Model = Open })}, "b.json: the open model"},
		{"counts do not add up", []*Result{mk("", nil), mk("", func(r *Result) { r.Requests = 5 })}, "do not add up"},
		{"ok is not the 2xx", []*Result{mk("", func(r *Result) { r.OK = 0 }), mk("", nil)}, "a.json: the 2xx of by_status"},
		{"no histograms", []*Result{mk("", func(r *Result) { r.Histograms.Latency = nil }), mk("", nil)}, "a.json: no histograms"},
		{"histogram short", []*Result{mk("", nil), mk("", func(r *Result) { r.Histograms.Latency.Buckets = nil })}, "buckets hold 0, its count says 1"},
		{"histogram tampered", []*Result{mk("", nil), mk("", func(r *Result) { r.Histograms.Latency.Buckets[0][0] = 1 << 40 })}, "out of range"},
		{"foreign scheme", []*Result{mk("", nil), mk("", func(r *Result) { r.Histograms.Latency.Scheme = "hdr" })}, "scheme"},
		{"counts too large", []*Result{mk("", func(r *Result) { r.NotSent = 1 << 60 }), mk("", nil)}, "counts beyond"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Merge(c.rs, []string{"a.json", "b.json"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("merge: %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := Merge([]*Result{mk("0/2", nil), mk("1/2", nil)}, nil); err != nil {
		t.Errorf("two good shards: %v", err)
	}
}

// TestShardsSplitTheLoad: three shards of one open-model load, started together, send every request of
// the schedule exactly once between them; three shards of a closed load share its connections.
func TestShardsSplitTheLoad(t *testing.T) {
	var n atomic.Int64
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	for _, c := range []struct {
		name string
		o    Options
		want int64 // requests of the whole load; 0: closed model
	}{
		{"open", Options{Rate: 300, Duration: 500 * time.Millisecond}, 150},
		{"open with a ramp", Options{Rate: 100, RateTo: 500, Duration: 500 * time.Millisecond}, 150},
		{"closed", Options{Connections: 5, Duration: 200 * time.Millisecond}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n.Store(0)
			conns.Store(0)
			start := time.Now().Add(200 * time.Millisecond)
			rs := make([]*Result, 3)
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Go(func() {
					o := c.o
					o.URL, o.Shard, o.Shards, o.StartAt = srv.URL, i, 3, start
					r, err := Run(context.Background(), o)
					if err != nil {
						t.Error(err)
						return
					}
					rs[i] = r
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			m, err := Merge(rs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.Requests != n.Load() || m.OK != m.Requests || (c.want > 0 && (m.Requests != c.want || m.NotSent != 0)) {
				t.Errorf("merged %d requests (%d ok, not sent %d), the server answered %d, want %d", m.Requests, m.OK, m.NotSent, n.Load(), c.want)
			}
			for i, r := range rs {
				if r.Meta.Start.Before(start) || r.Meta.Shard != []string{"0/3", "1/3", "2/3"}[i] {
					t.Errorf("shard %d: start %v (asked %v), shard %q", i, r.Meta.Start, start, r.Meta.Shard)
				}
			}
			if c.want == 0 && (m.Meta.Connections != 5 || conns.Load() != 5 || rs[0].Meta.Connections != 5) {
				t.Errorf("merged connections %d, the server saw %d, want the 5 shared out", m.Meta.Connections, conns.Load())
			}
		})
	}
}
