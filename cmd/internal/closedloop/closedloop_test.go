package closedloop

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// TestRunCountsOnlyTheWindow: sends answered inside the measured window count, failures apart from
// them, and the window callback brackets the measurement.
func TestRunCountsOnlyTheWindow(t *testing.T) {
	var calls atomic.Int64
	var window []bool
	boom := errors.New("boom")
	r := Run(Options{
		Senders: 2, Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond,
		Send: func(sender int) error {
			time.Sleep(time.Millisecond)
			if calls.Add(1)%4 == 0 {
				return boom
			}
			return nil
		},
		Window: func(start bool) { window = append(window, start) },
	})
	total := int(calls.Load())
	if r.Sent == 0 || r.Failed == 0 || r.Sent+r.Failed >= total {
		t.Fatalf("sent %d failed %d of %d calls: want both counted and the warm-up's left out", r.Sent, r.Failed, total)
	}
	if !errors.Is(r.FirstErr, boom) {
		t.Errorf("first error %v, want %v", r.FirstErr, boom)
	}
	if len(window) != 2 || !window[0] || window[1] {
		t.Errorf("window callbacks %v, want [true false]", window)
	}
	l := r.Latency
	if l.P50 < 1 || l.P99 < l.P50 || l.P999 < l.P99 || l.Max < l.P999 || r.Rate() != float64(r.Sent)/0.2 {
		t.Errorf("latency %+v rate %v for %d sends of >= 1 ms in 200ms", l, r.Rate(), r.Sent)
	}
}

// TestRunThinks: with a think time each sender pauses after every answer (in the warm-up, and after a
// failed send too), so an instant send is made at most once per think time.
func TestRunThinks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		warmup time.Duration
		err    error
	}{
		{"answered", 0, nil},
		{"in the warm-up", 100 * time.Millisecond, nil},
		{"failed", 0, errors.New("refused")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			r := Run(Options{Senders: 2, Warmup: tc.warmup, Duration: 200 * time.Millisecond, Think: 20 * time.Millisecond,
				Send: func(int) error { calls.Add(1); return tc.err }})
			// 2 senders × (warm-up + 200 ms) / 20 ms at most, plus the send each makes before its first pause
			most := 2*int64((tc.warmup+200*time.Millisecond)/(20*time.Millisecond)) + 2
			if n := calls.Load(); n < 2 || n > most || r.Sent > int(n) {
				t.Fatalf("%d sends (%d counted) with a 20 ms think time: want 2..%d", n, r.Sent, most)
			}
		})
	}
}

// TestResultLine: the line the scripts parse names every field, and a run without an answered send
// is an error that carries the first failure.
func TestResultLine(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		r       Result
		line    string
		wantErr error
	}{
		{"answered", Result{Duration: 2 * time.Second, Sent: 3000, Failed: 1,
			Latency: load.Latency{P50: 0.05, P99: 0.144, P999: 1.5, Max: 12.25}},
			"rate=1500 p50_ms=0.050 p99_ms=0.144 p999_ms=1.500 max_ms=12.250 failed=1 sent=3000", nil},
		{"nothing answered", Result{Duration: time.Second, Failed: 7, FirstErr: boom},
			"rate=0 p50_ms=0.000 p99_ms=0.000 p999_ms=0.000 max_ms=0.000 failed=7 sent=0", boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.String(); got != tc.line {
				t.Errorf("line %q, want %q", got, tc.line)
			}
			err := tc.r.Check()
			if (err == nil) != (tc.wantErr == nil) || tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || !errors.Is(err, ErrNoSends)) {
				t.Errorf("Check() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestMainFlags: bad common flags exit 2 naming the flag before anything is opened.
func TestMainFlags(t *testing.T) {
	good := Common{Senders: 1, Size: 100, Duration: time.Second, Timeout: time.Second}
	for _, tc := range []struct {
		name string
		edit func(*Common)
		flag string
	}{
		{"no senders", func(c *Common) { c.Senders = 0 }, "-c:"},
		{"too many senders", func(c *Common) { c.Senders = MaxSenders + 1 }, "-c:"},
		{"zero duration", func(c *Common) { c.Duration = 0 }, "-d:"},
		{"duration too long", func(c *Common) { c.Duration = MaxDuration + time.Second }, "-d:"},
		{"negative warm-up", func(c *Common) { c.Warmup = -time.Second }, "-warmup:"},
		{"negative think time", func(c *Common) { c.Think = -time.Millisecond }, "-think:"},
		{"think time too long", func(c *Common) { c.Think = MaxThink + time.Millisecond }, "-think:"},
		{"negative size", func(c *Common) { c.Size = -1 }, "-size:"},
		{"size too large", func(c *Common) { c.Size = MaxSize + 1 }, "-size:"},
		{"no timeout", func(c *Common) { c.Timeout = 0 }, "-timeout:"},
		{"timeout too long", func(c *Common) { c.Timeout = time.Hour }, "-timeout:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			opened := false
			var out, errb bytes.Buffer
			code := Main("x", c, func(Common) (Session, error) { opened = true; return Session{}, nil }, &out, &errb)
			if code != 2 || opened || !strings.Contains(errb.String(), tc.flag) {
				t.Errorf("exit %d, opened %v, stderr %q: want 2, not opened, naming %s", code, opened, errb.String(), tc.flag)
			}
		})
	}
}

// TestMainPrintsTheLine: a session that answers prints one result line (with its extra) and exits 0;
// one that cannot open exits 1.
func TestMainPrintsTheLine(t *testing.T) {
	c := Common{Senders: 1, Size: 1, Duration: 20 * time.Millisecond, Timeout: time.Second}
	var out, errb bytes.Buffer
	closed := false
	code := Main("x", c, func(Common) (Session, error) {
		return Session{Send: func(int) error { return nil }, Close: func() { closed = true },
			Extra: func(Result) string { return " cpu_us=1" }}, nil
	}, &out, &errb)
	if code != 0 || !closed || !strings.HasPrefix(out.String(), "rate=") || !strings.HasSuffix(out.String(), " cpu_us=1\n") {
		t.Errorf("exit %d closed %v stdout %q stderr %q", code, closed, out.String(), errb.String())
	}
	code = Main("x", c, func(Common) (Session, error) { return Session{}, errors.New("refused") }, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "refused") {
		t.Errorf("failed open: exit %d stderr %q", code, errb.String())
	}
}

// TestCommonHelpers: the body has Size bytes, and Timed gives every send a context with the deadline.
func TestCommonHelpers(t *testing.T) {
	c := Common{Size: 100, Timeout: time.Minute}
	if b := c.Body(); len(b) != 100 || strings.Trim(string(b), "x") != "" {
		t.Errorf("body %q", b)
	}
	var left time.Duration
	err := c.Timed(func(ctx context.Context, i int) error {
		d, ok := ctx.Deadline()
		if !ok || i != 3 {
			return errors.New("no deadline or wrong sender")
		}
		left = time.Until(d)
		return nil
	})(3)
	if err != nil || left <= 0 || left > time.Minute {
		t.Errorf("Timed: err %v, deadline in %v: want nil and within the minute", err, left)
	}
}

// TestRunMeasuresClientCPU: the result carries the process's CPU over the measured window, and the line
// the scripts read gives it per answered send (the anchors' "client CPU/msg" column).
func TestRunMeasuresClientCPU(t *testing.T) {
	var sink atomic.Uint64
	r := Run(Options{Senders: 2, Warmup: 10 * time.Millisecond, Duration: 200 * time.Millisecond, Send: func(int) error {
		x := uint64(1)
		for i := range 20_000 { // work, so the window holds CPU time whatever the clock's resolution
			x = x*31 + uint64(i)
		}
		sink.Add(x)
		return nil
	}})
	if r.Sent == 0 || r.CPU <= 0 {
		t.Fatalf("sent %d, CPU %v: want both > 0", r.Sent, r.CPU)
	}
	if !strings.Contains(r.String(), " client_us=") {
		t.Fatalf("line %q: no client_us", r.String())
	}
}
