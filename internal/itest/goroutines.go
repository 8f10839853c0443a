package itest

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
)

// targetLabel is the profiler label StartTarget starts each mqtarget under: every goroutine the
// target starts, and every one those start (HTTP connections, broker clients, their timers' owners),
// carries it. A fault test counts its own target's goroutines by it, so it can run beside other tests
// of the package instead of needing the whole process to itself.
const targetLabel = "mqtarget_itest_target"

var targetSeq atomic.Uint64

// labelled runs f with a fresh value of targetLabel on the calling goroutine and returns that value.
func labelled(f func()) string {
	id := strconv.FormatUint(targetSeq.Add(1), 10)
	pprof.Do(context.Background(), pprof.Labels(targetLabel, id), func(context.Context) { f() })
	return id
}

// goroutines returns how many goroutines carry the target's label, and their stacks.
func (tg *Target) goroutines() (int, string) {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return labelledGoroutines(b.String(), tg.label)
}

// labelledGoroutines picks the records of a goroutine profile (debug=1 text: a record per stack, "N @
// pcs", a "# labels: {...}" line when it has labels, the frames, a blank line) whose labels give
// targetLabel the value id.
func labelledGoroutines(profile, id string) (int, string) {
	want := strconv.Quote(targetLabel) + ":" + strconv.Quote(id)
	var n int
	var out strings.Builder
	for rec := range strings.SplitSeq(profile, "\n\n") {
		lines := strings.SplitN(rec, "\n", 3) // the count line, the labels line, the rest
		if len(lines) < 2 {
			continue
		}
		count, _, ok := strings.Cut(lines[0], " @ ")
		if !ok {
			continue
		}
		labels, isLabels := strings.CutPrefix(lines[1], "# labels: ")
		if !isLabels || !strings.Contains(labels, want) {
			continue
		}
		c, err := strconv.Atoi(count)
		if err != nil {
			continue
		}
		n += c
		out.WriteString(rec)
		out.WriteString("\n\n")
	}
	return n, out.String()
}
