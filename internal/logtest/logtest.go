// Package logtest records log lines for tests that count them (rate limits, floods).
package logtest

import (
	"context"
	"log/slog"
	"sync"
)

// Recorder is a slog.Handler keeping the messages of the lines at warn and above. Attributes are
// dropped: the tests count lines and tell them apart by message.
type Recorder struct {
	mu    sync.Mutex
	lines []string
}

// Logger returns a logger recording into a new Recorder.
func Logger() (*slog.Logger, *Recorder) {
	r := &Recorder{}
	return slog.New(r), r
}

func (r *Recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Message)
	return nil
}

func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *Recorder) WithGroup(string) slog.Handler      { return r }

// Lines returns the messages recorded so far.
func (r *Recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Counts returns how many lines of each message were recorded.
func (r *Recorder) Counts() map[string]int {
	m := map[string]int{}
	for _, l := range r.Lines() {
		m[l]++
	}
	return m
}
