package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
)

// The progress line of `mqtarget roundtrip`: shown only once a batch has run for progressDelay, so
// short batches print nothing extra, and rewritten at most every progressEvery.
const (
	progressDelay = time.Second
	progressEvery = 250 * time.Millisecond
)

// progressLine rewrites one line of a terminal in place; its clock is the batch's elapsed time.
type progressLine struct {
	mu     sync.Mutex
	w      io.Writer
	broker string
	shown  bool
	last   time.Duration // Elapsed of the last line written
}

func newProgressLine(w io.Writer, broker string) *progressLine {
	return &progressLine{w: w, broker: broker}
}

// update writes p's line when the throttle allows it.
func (l *progressLine) update(p roundtrip.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.Elapsed < progressDelay || (l.shown && p.Elapsed-l.last < progressEvery) {
		return
	}
	fmt.Fprintf(l.w, "\r%s\x1b[K", formatProgress(l.broker, p))
	l.shown, l.last = true, p.Elapsed
}

// clear erases the line, if one was written, so the result starts on a clean line. A nil line (no
// terminal) does nothing.
func (l *progressLine) clear() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		fmt.Fprint(l.w, "\r\x1b[K")
		l.shown = false
	}
}

// formatProgress is the line's text: how many were sent and came back, of how many, and for how long.
func formatProgress(broker string, p roundtrip.Progress) string {
	pct := func(n int) int {
		if p.Count == 0 {
			return 0
		}
		return n * 100 / p.Count
	}
	return fmt.Sprintf("roundtrip %s: sent %d/%d (%d%%), back %d (%d%%), %.1fs",
		broker, p.Sent, p.Count, pct(p.Sent), p.Acked, pct(p.Acked), p.Elapsed.Seconds())
}

// isTerminal reports whether w is a character device (a terminal, or /dev/null, where the line is
// harmless): a file or pipe gets only the result.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
