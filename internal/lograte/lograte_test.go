package lograte

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// clock is a test clock the limiter reads.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestAllow(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := New(10 * time.Second)
	l.SetClock(c.now)
	steps := []struct {
		name       string
		advance    time.Duration
		key        string
		ok         bool
		suppressed int
	}{
		{"first line of a key", 0, "a", true, 0},
		{"again at once", 0, "a", false, 0},
		{"within the interval", 9 * time.Second, "a", false, 0},
		{"another key", 0, "b", true, 0},
		{"past the interval, with the count", time.Second, "a", true, 2},
		{"within the next interval", time.Second, "a", false, 0},
		{"past it", 10 * time.Second, "a", true, 1},
		{"past it with none between", 10 * time.Second, "a", true, 0},
	}
	for _, s := range steps {
		c.t = c.t.Add(s.advance)
		ok, n := l.Allow(s.key)
		if ok != s.ok || n != s.suppressed {
			t.Errorf("%s: Allow = %v, %d; want %v, %d", s.name, ok, n, s.ok, s.suppressed)
		}
	}
}

// Past MaxKeys new keys share one: free text cannot make every line a first one.
func TestAllowBoundedKeys(t *testing.T) {
	l := New(time.Hour)
	allowed := 0
	for i := range 10 * MaxKeys {
		if ok, _ := l.Allow(fmt.Sprint("key ", i)); ok {
			allowed++
		}
	}
	if allowed != MaxKeys+1 || len(l.keys) != MaxKeys+1 {
		t.Errorf("%d lines allowed, %d keys; want %d", allowed, len(l.keys), MaxKeys+1)
	}
}

func TestLogger(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := New(10 * time.Second)
	l.SetClock(c.now)
	var buf bytes.Buffer
	log := Logger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})), l)
	for range 5 {
		log.Warn("connection lost", "addr", "a:1", "pending", 3) // one key: the pending count is not part of it
		log.Warn("connection lost", "addr", "b:2")               // another host
		log.With("host", "c:3").Warn("connection lost")          // the host given by With
		log.Info("connection lost", "addr", "a:1")               // another level
	}
	c.t = c.t.Add(10 * time.Second)
	log.Warn("connection lost", "addr", "a:1", "pending", 1)
	want := `level=WARN msg="connection lost" addr=a:1 pending=3
level=WARN msg="connection lost" addr=b:2
level=WARN msg="connection lost" host=c:3
level=INFO msg="connection lost" addr=a:1
level=WARN msg="connection lost" addr=a:1 pending=1 suppressed=4
`
	if got := buf.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if Logger(nil, l) != nil {
		t.Error("Logger(nil) is not nil")
	}
}

func TestCause(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"connection lost with commands pending", "connection lost with commands pending"},
		{"TOPIC(orders) ERROR: failed to write message to backend - write /d/orders.diskqueue.000001.dat: no space left on device",
			"TOPIC() ERROR: failed to write message to backend"},
		{"DISKQUEUE(a:b) failed to sync - sync: no space left on device", "DISKQUEUE() failed to sync"},
		{"[127.0.0.1:43210] - E_BAD_BODY", "[] - E_BAD_BODY"},
		{"[127.0.0.1:1] - E_PUB_FAILED PUB failed write /d/t.diskqueue.000000.dat: no space left on device - write /d/t.diskqueue.000000.dat: no space left on device",
			"[] - E_PUB_FAILED PUB failed write /d/t.diskqueue.#.dat: no space left on device"},
		{"[] - - x", "[] - - x"},
		{"PROTOCOL(V2): [127.0.0.1:5] exiting ioloop", "PROTOCOL(): [] exiting ioloop"},
		{"ERR    12 [t/c] (127.0.0.1:4150) IO error - EOF", "ERR    # [] () IO error"},
		{"unbalanced ) and ( nested (a(b)c) end", "unbalanced ) and ("},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := Cause(tc.in); got != tc.want {
				t.Errorf("Cause(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
