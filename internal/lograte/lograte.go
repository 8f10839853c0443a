// Package lograte bounds the log lines a failing broker can cause: the first line of each host and
// cause is logged, then at most one per interval, carrying the number of lines suppressed since the
// last one. Every broker path (connections, answers, dials, the embedded brokers, the client libraries)
// logs through it, so an outage or a flapping broker logs a few lines however many requests it fails.
package lograte

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Interval is how often a line of one host and cause is logged at most after its first.
const Interval = 10 * time.Second

// MaxKeys bounds the causes a limiter tells apart: past it every new cause shares one key, so free
// text (topic names in a broker's line) cannot grow the limiter or turn into one line each.
const MaxKeys = 512

// maxKeyLen bounds a key's bytes, so that MaxKeys bounds the limiter's memory whatever the lines say.
const maxKeyLen = 256

// SuppressedKey is the attribute a logged line carries when lines of its key were suppressed before it.
const SuppressedKey = "suppressed"

// overflow is the key of every cause past MaxKeys.
const overflow = "\x00overflow"

// Limiter decides which lines of each key are logged. It is safe for concurrent use.
type Limiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*keyState
}

type keyState struct {
	last       time.Time // when a line of this key was last logged
	suppressed int
}

// New returns a limiter letting a key's line through at most once per every after its first.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, now: time.Now, keys: map[string]*keyState{}}
}

// SetClock replaces the limiter's clock (tests).
func (l *Limiter) SetClock(now func() time.Time) { l.now = now }

// Allow reports whether a line of key may be logged now and, if so, how many lines of key were
// suppressed since the last one logged.
func (l *Limiter) Allow(key string) (bool, int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= MaxKeys {
			key = overflow
			s, ok = l.keys[key]
		}
		if !ok {
			l.keys[key] = &keyState{last: now}
			return true, 0
		}
	}
	if now.Sub(s.last) < l.every {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.last, s.suppressed = now, 0
	return true, n
}

// hostAttr reports whether attribute key names a line's host, which is part of the line's key.
func hostAttr(key string) bool {
	switch key {
	case "host", "addr", "broker", "node":
		return true
	}
	return strings.HasSuffix(key, "_broker") // a broker of a cluster, beside the host the line is about
}

// Logger returns log with every line limited by l, keyed by its level, Cause(message) and the values
// of its host attributes (host, addr, broker, node, *_broker). A nil log stays nil.
func Logger(log *slog.Logger, l *Limiter) *slog.Logger {
	if log == nil {
		return nil
	}
	return slog.New(&handler{next: log.Handler(), lim: l})
}

type handler struct {
	next slog.Handler
	lim  *Limiter
	key  string // host attribute values given by With
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte('|')
	b.WriteString(Cause(r.Message))
	b.WriteString(h.key)
	r.Attrs(func(a slog.Attr) bool {
		if hostAttr(a.Key) {
			b.WriteByte('|')
			b.WriteString(a.Value.String())
		}
		return true
	})
	key := b.String()
	if len(key) > maxKeyLen {
		key = key[:maxKeyLen]
	}
	ok, n := h.lim.Allow(key)
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(SuppressedKey, n))
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	key := h.key
	for _, a := range attrs {
		if hostAttr(a.Key) {
			key += "|" + a.Value.String()
		}
	}
	return &handler{next: h.next.WithAttrs(attrs), lim: h.lim, key: key}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), lim: h.lim, key: h.key}
}

// Cause reduces a free-text line (an embedded broker's, a client library's) to what tells its causes
// apart: what is in parentheses or brackets (topic, channel and client names) and digits (counts,
// ports, file numbers) are dropped, and so is what follows " - " (a broker's detail: the error, with
// file names) once a word came before it ("[127.0.0.1:5] - E_BAD_BODY ..." keeps E_BAD_BODY). A
// fixed message is mostly itself.
func Cause(s string) string {
	var out string
	for {
		seg, rest, more := strings.Cut(s, " - ")
		out += causeOf(seg)
		if !more || strings.ContainsFunc(out, unicode.IsLetter) {
			return out
		}
		out += " - "
		s = rest
	}
}

func causeOf(s string) string {
	var b strings.Builder
	depth := 0
	for _, c := range s {
		switch {
		case c == '(' || c == '[':
			if depth == 0 {
				b.WriteRune(c)
			}
			depth++
		case (c == ')' || c == ']') && depth > 0:
			depth--
			if depth == 0 {
				b.WriteRune(c)
			}
		case depth > 0:
		case c >= '0' && c <= '9':
			if !strings.HasSuffix(b.String(), "#") {
				b.WriteByte('#')
			}
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}
