package publishers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

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
	p := publishers.NewMetrics(reg, nil).Instrument("nsq", stub)
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
	if series["mqtarget_publish_messages_total"] != 2*3*7 || series["mqtarget_publish_duration_seconds"] != 2*3 {
		t.Errorf("pre-created series %v, want 42 counters and 6 histograms", series)
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
		counterKey("a:4150", "sync", "ok"):          2,
		counterKey("b:4150", "sync", "unavailable"): 1,
		counterKey("b:4150", "sync", "closed"):      1,
		counterKey("a:4150", "sync", "timeout"):     1,
		counterKey("b:4150", "batch", "ok"):         3,
		counterKey("a:4150", "batch", "rejected"):   2,
		counterKey("a:4150", "sync", "canceled"):    1,
		counterKey("a:4150", "sync", "error"):       1,
		counterKey("a:4150", "async", "closed"):     1,
		counterKey("b:4150", "async", "ok"):         1,
		counterKey("b:4150", "async", "timeout"):    1,
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
		// the outer kind decides: a connection lost for a rejected message is unavailable
		{publishers.Wrap(publishers.ErrUnavailable, publishers.LostErr("stomp h:1", time.Second, wrapKind(publishers.ErrRejected, "ERROR"))), "unavailable"},
		{fmt.Errorf("topic t: %w", publishers.Wrap(publishers.ErrRejected, wrapKind(publishers.ErrTimeout, "x"))), "rejected"},
		{publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("x: %w", context.Canceled)), "unavailable"},
		{fmt.Errorf("x: %w", context.Canceled), "canceled"},
		{errors.New("x"), "error"},
	} {
		t.Run(tc.want+fmt.Sprint(tc.err), func(t *testing.T) {
			if got := publishers.Result(tc.err); got != tc.want {
				t.Errorf("Result(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
	// An inner kind is hidden from errors.Is, its text and its other causes are not.
	inner := fmt.Errorf("read: %w", io.ErrUnexpectedEOF)
	err := publishers.Wrap(publishers.ErrUnavailable, publishers.Wrap(publishers.ErrRejected, fmt.Errorf("%w; %w", inner, publishers.ErrClosed)))
	switch {
	case errors.Is(err, publishers.ErrRejected):
		t.Errorf("%v is ErrRejected inside ErrUnavailable", err)
	case !errors.Is(err, publishers.ErrUnavailable), !errors.Is(err, io.ErrUnexpectedEOF), !errors.Is(err, publishers.ErrClosed):
		t.Errorf("%v lost its kind or a cause", err)
	case !strings.Contains(err.Error(), "broker rejected the message: read: unexpected EOF"):
		t.Errorf("%v lost the inner text", err)
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
		{"instrumented", publishers.NewMetrics(prometheus.NewRegistry(), nil).Instrument("nsq", raw)},
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

// logRecorder keeps the records logged through it.
type logRecorder struct {
	mu      sync.Mutex
	records []map[string]string // attribute values by key, with "msg"
	attrs   []slog.Attr
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorderView{h, append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error { return h.handle(h.attrs, r) }

func (h *logRecorder) handle(attrs []slog.Attr, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	for _, a := range attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, m)
	return nil
}

func (h *logRecorder) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range h.records {
		out = append(out, fmt.Sprintf("%s %s %s %s mode=%s messages=%s unlogged=%s", m["level"], m["host"], m["result"], m["err"],
			m["mode"], m["messages"], m["unlogged_since_last"]))
	}
	return out
}

// logRecorderView is a logRecorder with attributes added by With.
type logRecorderView struct {
	*logRecorder
	attrs []slog.Attr
}

func (v *logRecorderView) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorderView{v.logRecorder, append(append([]slog.Attr(nil), v.attrs...), as...)}
}
func (v *logRecorderView) Handle(_ context.Context, r slog.Record) error { return v.handle(v.attrs, r) }

// TestFailureLog: a failed publish is logged with its broker, host, result and error, sync or async;
// further failures of the same host and result within the interval are only counted, and the count
// comes with the next logged one; other hosts and results are logged apart.
func TestFailureLog(t *testing.T) {
	rec := &logRecorder{}
	m := publishers.NewMetrics(prometheus.NewRegistry(), slog.New(rec))
	stub := &stubPub{hosts: []string{"a:1", "b:1"}}
	p := m.Instrument("nsq", stub)
	ctx := context.Background()
	rejected := wrapKind(publishers.ErrRejected, "E_BAD_MESSAGE")
	asyncFail := func(host int, err error) {
		t.Helper()
		stub.set(nil, err)
		if err := p.PublishAsync(host, "t", nil, func(error) {}); err != nil {
			t.Fatal(err)
		}
		stub.releaseAll()
	}

	asyncFail(0, wrapKind(publishers.ErrTimeout, "no answer")) // logged: first timeout on a
	asyncFail(0, wrapKind(publishers.ErrTimeout, "no answer")) // held
	stub.set(wrapKind(publishers.ErrTimeout, "no answer"), nil)
	_ = p.PublishBatch(ctx, 0, "t", [][]byte{{1}, {2}}) // held: same host and result, another mode
	stub.set(rejected, nil)
	_ = p.Publish(ctx, 0, "t", nil)                        // logged: first rejection on a
	_ = p.Publish(ctx, 1, "t", nil)                        // logged: first rejection on b
	asyncFail(1, nil)                                      // ok: never logged
	m.SetFailureLogInterval(0)                             // as if the interval had passed
	asyncFail(0, wrapKind(publishers.ErrTimeout, "again")) // logged, with the 3 held messages
	asyncFail(0, wrapKind(publishers.ErrTimeout, "again")) // logged, nothing held since

	want := []string{
		"WARN a:1 timeout no answer: publish timed out mode=async messages=1 unlogged=0",
		"WARN a:1 rejected E_BAD_MESSAGE: broker rejected the message mode=sync messages=1 unlogged=0",
		"WARN b:1 rejected E_BAD_MESSAGE: broker rejected the message mode=sync messages=1 unlogged=0",
		"WARN a:1 timeout again: publish timed out mode=async messages=1 unlogged=3",
		"WARN a:1 timeout again: publish timed out mode=async messages=1 unlogged=0",
	}
	if got := rec.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log\n got %q\nwant %q", got, want)
	}
	for _, r := range rec.records {
		if r["broker"] != "nsq" || r["msg"] != "publish failed" {
			t.Errorf("record %v lacks broker=nsq or its message", r)
		}
	}
	if publishers.FailureLogInterval != 10*time.Second {
		t.Errorf("FailureLogInterval = %v; README says 10 s", publishers.FailureLogInterval)
	}
}

// TestPublishBytes: mqtarget_publish_bytes_total counts the payload bytes of acknowledged publishes
// per host, in every mode, async ones when their completion arrives; failed publishes add nothing.
func TestPublishBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	stub := &stubPub{hosts: []string{"a:4150", "b:4150"}}
	p := publishers.NewMetrics(reg, nil).Instrument("nsq", stub)
	ctx := context.Background()
	for _, s := range []struct {
		name string
		err  error
		do   func() error
	}{
		{"sync 5 bytes ok on a", nil, func() error { return p.Publish(ctx, 0, "t", make([]byte, 5)) }},
		{"batch 3+4 bytes ok on b", nil, func() error { return p.PublishBatch(ctx, 1, "t", [][]byte{make([]byte, 3), make([]byte, 4)}) }},
		{"sync 100 bytes timed out on a", publishers.ErrTimeout, func() error { return p.Publish(ctx, 0, "t", make([]byte, 100)) }},
		{"batch 200 bytes rejected on b", publishers.ErrRejected, func() error { return p.PublishBatch(ctx, 1, "t", [][]byte{make([]byte, 200)}) }},
		{"async 11 bytes ok on a", nil, func() error { return p.PublishAsync(0, "t", make([]byte, 11), func(error) {}) }},
		{"async 50 bytes refused on b", publishers.ErrClosed, func() error { return p.PublishAsync(1, "t", make([]byte, 50), func(error) {}) }},
	} {
		stub.set(s.err, nil)
		if err := s.do(); !errors.Is(err, s.err) {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	stub.set(nil, publishers.ErrTimeout)
	if err := p.PublishAsync(1, "t", make([]byte, 70), func(error) {}); err != nil { // completes with a timeout
		t.Fatal(err)
	}
	bytesOf := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == "mqtarget_publish_bytes_total" {
				for _, m := range mf.GetMetric() {
					out[labelsOf(m)["host"]] = m.GetCounter().GetValue()
				}
			}
		}
		return out
	}
	if got := bytesOf(); got["a:4150"] != 5 || got["b:4150"] != 7 {
		t.Errorf("before async completions: %v, want a 5, b 7", got)
	}
	stub.releaseAll()
	if got := bytesOf(); got["a:4150"] != 16 || got["b:4150"] != 7 || len(got) != 2 {
		t.Errorf("bytes %v, want a 16, b 7", got)
	}
}
