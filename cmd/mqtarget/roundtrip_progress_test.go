package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
)

func TestFormatProgress(t *testing.T) {
	cases := []struct {
		name string
		p    roundtrip.Progress
		want string
	}{
		{"half sent", roundtrip.Progress{Count: 10000, Sent: 5000, Acked: 1234, Elapsed: 1500 * time.Millisecond},
			"roundtrip nsq: sent 5000/10000 (50%), back 1234 (12%), 1.5s"},
		{"all back", roundtrip.Progress{Count: 3, Sent: 3, Acked: 3, Elapsed: 12 * time.Second},
			"roundtrip nsq: sent 3/3 (100%), back 3 (100%), 12.0s"},
		{"no count", roundtrip.Progress{Elapsed: time.Second}, "roundtrip nsq: sent 0/0 (0%), back 0 (0%), 1.0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := formatProgress("nsq", c.p); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestProgressLineThrottle: nothing before a second, then at most one line per progressEvery, each
// rewriting the line in place, and clear erases it only when something was shown.
func TestProgressLineThrottle(t *testing.T) {
	cases := []struct {
		name     string
		elapsed  []time.Duration // the batch's progress reports
		lines    int
		lastSent int
	}{
		{name: "short batch", elapsed: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 999 * time.Millisecond}},
		{name: "at one second", elapsed: []time.Duration{900 * time.Millisecond, time.Second}, lines: 1, lastSent: 1000},
		{name: "throttled", elapsed: []time.Duration{time.Second, 1100 * time.Millisecond, 1200 * time.Millisecond,
			1250 * time.Millisecond, 1300 * time.Millisecond, 1500 * time.Millisecond}, lines: 3, lastSent: 1500},
		{name: "every 100 ms for 3 s", elapsed: steps(100*time.Millisecond, 30), lines: 7, lastSent: 2800}, // 1.0, 1.3, ... 2.8 s,
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := newProgressLine(&buf, "stomp")
			for _, e := range c.elapsed {
				l.update(roundtrip.Progress{Count: 5000, Sent: int(e.Milliseconds()), Elapsed: e})
			}
			out := buf.String()
			if n := strings.Count(out, "\r"); n != c.lines {
				t.Fatalf("%d lines, want %d: %q", n, c.lines, out)
			}
			if c.lines > 0 {
				lines := strings.Split(out, "\r")
				last := lines[len(lines)-1]
				if want := formatProgress("stomp", roundtrip.Progress{Count: 5000, Sent: c.lastSent, Elapsed: time.Duration(c.lastSent) * time.Millisecond}) + "\x1b[K"; last != want {
					t.Errorf("last line %q, want %q", last, want)
				}
			}
			buf.Reset()
			l.clear()
			if want := map[bool]string{true: "\r\x1b[K", false: ""}[c.lines > 0]; buf.String() != want {
				t.Errorf("clear wrote %q, want %q", buf.String(), want)
			}
		})
	}
	var none *progressLine
	none.clear() // no terminal: nothing to clear, no panic
}

func steps(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * d
	}
	return out
}

func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) || isTerminal(&bytes.Buffer{}) {
		t.Error("a regular file or a buffer taken for a terminal")
	}
}
