package publishers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mqtarget/mqtarget/publishers"
)

// stubPub returns err for every publish and completes async publishes when release is called.
type stubPub struct {
	hosts []string

	mu       sync.Mutex
	err      error // returned by Publish, PublishBatch and PublishAsync
	asyncErr error // passed to done
	held     []func()
}

func (p *stubPub) Publish(context.Context, int, string, []byte) error        { return p.get() }
func (p *stubPub) PublishBatch(context.Context, int, string, [][]byte) error { return p.get() }

func (p *stubPub) PublishAsync(_ int, _ string, _ []byte, done func(error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	err := p.asyncErr
	p.held = append(p.held, func() { done(err) })
	return nil
}

func (p *stubPub) Hosts() []string                 { return p.hosts }
func (p *stubPub) Ping(context.Context, int) error { return nil }
func (p *stubPub) ValidateTopic(string) error      { return nil }
func (p *stubPub) Close() error                    { return nil }

func (p *stubPub) set(err, asyncErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err, p.asyncErr = err, asyncErr
}

func (p *stubPub) get() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *stubPub) heldCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// releaseAll completes every held async publish with the outcome set when it was started.
func (p *stubPub) releaseAll() {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, done := range held {
		done()
	}
}

func counterKey(host, mode, result string) string { return host + " " + mode + " " + result }
func histKey(host, mode string) string            { return host + " " + mode }
func wrapKind(kind error, msg string) error       { return fmt.Errorf("%s: %w", msg, kind) }

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// snapshot returns the non-zero publish counters by "host mode result" and histogram counts by "host mode".
func snapshot(t *testing.T, reg *prometheus.Registry) (map[string]float64, map[string]uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counters, hists := map[string]float64{}, map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			if l["broker"] != "nsq" {
				t.Errorf("%s broker label %q", mf.GetName(), l["broker"])
			}
			switch mf.GetName() {
			case "mqtarget_publish_messages_total":
				if v := m.GetCounter().GetValue(); v != 0 {
					counters[counterKey(l["host"], l["mode"], l["result"])] = v
				}
			case "mqtarget_publish_duration_seconds":
				if n := m.GetHistogram().GetSampleCount(); n != 0 {
					hists[histKey(l["host"], l["mode"])] = n
				}
			}
		}
	}
	return counters, hists
}

func TestInstrument(t *testing.T) {
	reg := prometheus.NewRegistry()
	stub := &stubPub{hosts: []string{"a:4150", "b:4150"}}
	p := publishers.NewMetrics(reg).Instrument("nsq", stub)
	ctx := context.Background()

	// Every label combination exists (at zero) before any publish, so dashboards see them at once.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
	}
	if series["mqtarget_publish_messages_total"] != 2*3*6 || series["mqtarget_publish_duration_seconds"] != 2*3 {
		t.Errorf("pre-created series %v, want 36 counters and 6 histograms", series)
	}

	steps := []struct {
		name string
		err  error
		do   func() error
	}{
		{"sync ok on a", nil, func() error { return p.Publish(ctx, 0, "t", []byte("x")) }},
		{"sync ok on a again", nil, func() error { return p.Publish(ctx, 0, "t", []byte("x")) }},
		{"sync unavailable on b", wrapKind(publishers.ErrUnavailable, "dial"), func() error { return p.Publish(ctx, 1, "t", nil) }},
		{"sync closed on b", publishers.ErrClosed, func() error { return p.Publish(ctx, 1, "t", nil) }},
		{"sync timeout on a", wrapKind(publishers.ErrTimeout, "wait"), func() error { return p.Publish(ctx, 0, "t", nil) }},
		{"batch of 3 ok on b", nil, func() error { return p.PublishBatch(ctx, 1, "t", [][]byte{{1}, {2}, {3}}) }},
		{"batch of 2 rejected on a", wrapKind(publishers.ErrRejected, "E_MPUB_FAILED"), func() error { return p.PublishBatch(ctx, 0, "t", [][]byte{{1}, {2}}) }},
		{"sync canceled on a", context.Canceled, func() error { return p.Publish(ctx, 0, "t", nil) }},
		{"sync other error on a", errors.New("odd"), func() error { return p.Publish(ctx, 0, "t", nil) }},
		{"async refused on a", publishers.ErrClosed, func() error {
			return p.PublishAsync(0, "t", nil, func(error) { t.Error("done called for a refused publish") })
		}},
		{"host just past the end is not counted", errors.New("no host 2"), func() error { return p.Publish(ctx, 2, "t", nil) }},
		{"out of range host is not counted", errors.New("no host 5"), func() error { return p.Publish(ctx, 5, "t", nil) }},
		{"negative host is not counted", errors.New("no host -1"), func() error { return p.PublishBatch(ctx, -1, "t", [][]byte{{1}}) }},
	}
	for _, s := range steps {
		stub.set(s.err, nil)
		if err := s.do(); !errors.Is(err, s.err) && err != s.err {
			t.Errorf("%s: error %v, want %v passed through", s.name, err, s.err)
		}
	}

	// Async publishes are counted when their completion arrives, under the outcome it carries.
	stub.set(nil, nil)
	var doneErrs []error
	var mu sync.Mutex
	record := func(err error) { mu.Lock(); doneErrs = append(doneErrs, err); mu.Unlock() }
	if err := p.PublishAsync(1, "t", nil, record); err != nil {
		t.Fatal(err)
	}
	stub.set(nil, wrapKind(publishers.ErrTimeout, "late"))
	if err := p.PublishAsync(1, "t", nil, record); err != nil {
		t.Fatal(err)
	}
	stub.set(nil, nil)
	if err := p.PublishAsync(2, "t", nil, record); err != nil { // out of range: passed through uncounted
		t.Fatal(err)
	}
	before, _ := snapshot(t, reg)
	if before[counterKey("b:4150", "async", "ok")] != 0 {
		t.Error("async counted before its completion")
	}
	if stub.heldCount() != 3 {
		t.Fatalf("held %d", stub.heldCount())
	}
	stub.releaseAll()
	if len(doneErrs) != 3 || doneErrs[0] != nil || !errors.Is(doneErrs[1], publishers.ErrTimeout) || doneErrs[2] != nil {
		t.Errorf("done got %v, want the inner outcomes passed through", doneErrs)
	}

	counters, hists := snapshot(t, reg)
	wantCounters := map[string]float64{
		counterKey("a:4150", "sync", "ok"):           2,
		counterKey("b:4150", "sync", "unavailable"):  2,
		counterKey("a:4150", "sync", "timeout"):      1,
		counterKey("b:4150", "batch", "ok"):          3,
		counterKey("a:4150", "batch", "rejected"):    2,
		counterKey("a:4150", "sync", "canceled"):     1,
		counterKey("a:4150", "sync", "error"):        1,
		counterKey("a:4150", "async", "unavailable"): 1,
		counterKey("b:4150", "async", "ok"):          1,
		counterKey("b:4150", "async", "timeout"):     1,
	}
	wantHists := map[string]uint64{
		histKey("a:4150", "sync"):  5,
		histKey("b:4150", "sync"):  2,
		histKey("b:4150", "batch"): 1,
		histKey("a:4150", "batch"): 1,
		histKey("a:4150", "async"): 1,
		histKey("b:4150", "async"): 2,
	}
	if fmt.Sprint(counters) != fmt.Sprint(wantCounters) {
		t.Errorf("counters\n got %v\nwant %v", counters, wantCounters)
	}
	if fmt.Sprint(hists) != fmt.Sprint(wantHists) {
		t.Errorf("histogram counts\n got %v\nwant %v", hists, wantHists)
	}
}

func TestResult(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{wrapKind(publishers.ErrTimeout, "x"), "timeout"},
		{wrapKind(publishers.ErrRejected, "x"), "rejected"},
		{wrapKind(publishers.ErrUnavailable, "x"), "unavailable"},
		{publishers.ErrClosed, "unavailable"},
		{fmt.Errorf("x: %w", context.Canceled), "canceled"},
		{errors.New("x"), "error"},
	} {
		t.Run(tc.want+fmt.Sprint(tc.err), func(t *testing.T) {
			if got := publishers.Result(tc.err); got != tc.want {
				t.Errorf("Result(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// nopPub acknowledges at once, so BenchmarkMetrics measures the decorator alone.
type nopPub struct{ *stubPub }

func (nopPub) Publish(context.Context, int, string, []byte) error { return nil }

// BenchmarkMetrics is the decorator's cost per publish: "instrumented" minus "bare".
func BenchmarkMetrics(b *testing.B) {
	raw := nopPub{&stubPub{hosts: []string{"a:4150"}}}
	for _, tc := range []struct {
		name string
		pub  publishers.Publisher
	}{
		{"bare", raw},
		{"instrumented", publishers.NewMetrics(prometheus.NewRegistry()).Instrument("nsq", raw)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx, body := context.Background(), []byte("x")
			b.ReportAllocs()
			for b.Loop() {
				if err := tc.pub.Publish(ctx, 0, "t", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
