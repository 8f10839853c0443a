// Package consume reads a topic and accounts for what arrived: count, rate, end-to-end latency from the
// payloads' send timestamps, ids lost (gaps in a producer run's sequence) and duplicates. The consume
// command is a thin adapter over Run; tests drive Run and Tally directly.
package consume

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// Options say what to read and when to stop.
type Options struct {
	Broker   string        // the broker's name, for the report
	Topic    string        // the topic to read
	Count    int           // stop after this many messages; 0: no limit
	Duration time.Duration // stop after this long; 0: no limit
}

// Run consumes o.Topic with c until o.Count messages arrived, o.Duration passed or ctx ended, whichever
// comes first, and reports what arrived. It returns an error only when consuming could not start or
// failed; a count not reached is in the report (Report.OK).
func Run(ctx context.Context, c publishers.Consumer, o Options) (Report, error) {
	if o.Count < 0 {
		return Report{}, fmt.Errorf("count: must be 0 (no limit) or more, got %d", o.Count)
	}
	if o.Duration < 0 {
		return Report{}, fmt.Errorf("duration: must be 0 (no limit) or more, got %v", o.Duration)
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	t := NewTally()
	start := time.Now()
	err := c.Consume(ctx, o.Topic, func(d publishers.Delivery) {
		if n := t.Add(d); o.Count > 0 && n >= o.Count {
			stop()
		}
	})
	if err != nil {
		return Report{}, err
	}
	r := t.Report(time.Since(start))
	r.Broker, r.Topic, r.Want = o.Broker, o.Topic, o.Count
	return r, nil
}

// Tally accumulates deliveries; it is safe for concurrent use.
type Tally struct {
	mu          sync.Mutex
	count       int
	unparsable  int
	duplicates  int
	first, last time.Time // receive times
	latencies   []time.Duration
	runs        map[string]map[uint64]struct{} // run (RunStats.Run) -> sequence numbers seen
}

// NewTally returns an empty Tally.
func NewTally() *Tally { return &Tally{runs: map[string]map[uint64]struct{}{}} }

// Add records d and returns how many deliveries were added so far, this one included.
func (t *Tally) Add(d publishers.Delivery) int {
	id, sent, perr := message.Parse(d.Body)
	var n uint64
	if perr == nil {
		n, perr = message.ParseID(id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count++
	if t.first.IsZero() || d.Received.Before(t.first) {
		t.first = d.Received
	}
	if d.Received.After(t.last) {
		t.last = d.Received
	}
	if perr != nil {
		t.unparsable++
		return t.count
	}
	// The payload's 64-bit run tells apart producers whose ids share the 24-bit prefix (sidecars of a
	// fleet writing one topic); payloads without it (short, or from older versions) have the prefix only.
	run := fmt.Sprintf("%06x", message.Run(n))
	if r, ok := message.ParseRun(d.Body); ok {
		run = fmt.Sprintf("%016x", r)
	}
	seqs := t.runs[run]
	if seqs == nil {
		seqs = map[uint64]struct{}{}
		t.runs[run] = seqs
	}
	if _, dup := seqs[message.Seq(n)]; dup {
		t.duplicates++
		return t.count
	}
	seqs[message.Seq(n)] = struct{}{}
	t.latencies = append(t.latencies, d.Received.Sub(sent))
	return t.count
}

// maxGaps bounds the gaps listed per run; Lost counts all of them.
const maxGaps = 100

// Report is what a consume run found. Times are in milliseconds, fractions allowed.
type Report struct {
	Broker     string     `json:"broker"`
	Topic      string     `json:"topic"`
	Want       int        `json:"want,omitempty"` // the -count asked for (0: none)
	Count      int        `json:"count"`          // messages received, duplicates and unparsable ones included
	ElapsedMS  float64    `json:"elapsed_ms"`     // from subscribing to the end
	Rate       float64    `json:"rate"`           // messages per second from the first to the last received
	Latency    Latency    `json:"latency_ms"`     // receive time minus the payload's send time, first copies only
	Lost       int        `json:"lost"`           // ids missing inside the runs' received ranges
	Duplicates int        `json:"duplicates"`     // copies of ids already received
	Unparsable int        `json:"unparsable"`     // bodies without an mqtarget header
	Runs       []RunStats `json:"runs"`           // per producer run, by run id
}

// Latency summarises end-to-end latencies. The send time comes from the publishing host's clock, so
// across hosts the numbers include the clocks' offset.
type Latency struct {
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// RunStats is one producer run (one message.Source: one mqtarget process) seen in the topic.
type RunStats struct {
	Run      string `json:"run"`       // the run, 16 hex digits; 6 (the ids' prefix) for payloads without it
	FirstSeq uint64 `json:"first_seq"` // lowest sequence number received
	LastSeq  uint64 `json:"last_seq"`  // highest sequence number received
	Received int    `json:"received"`  // distinct ids received
	Lost     int    `json:"lost"`      // sequence numbers missing between first_seq and last_seq
	Gaps     []Gap  `json:"gaps,omitempty"`
}

// Gap is a range of missing sequence numbers, both ends included.
type Gap struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// OK reports whether the run delivered cleanly: no id lost, none twice, and the count asked for reached.
func (r Report) OK() bool { return r.Lost == 0 && r.Duplicates == 0 && r.Count >= r.Want }

// Report summarises what was added; elapsed is the whole run's duration.
func (t *Tally) Report(elapsed time.Duration) Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := Report{Count: t.count, Duplicates: t.duplicates, Unparsable: t.unparsable, ElapsedMS: ms(elapsed)}
	if span := t.last.Sub(t.first); t.count > 1 && span > 0 {
		r.Rate = float64(t.count-1) / span.Seconds()
	}
	if len(t.latencies) > 0 {
		l := slices.Clone(t.latencies)
		slices.Sort(l)
		r.Latency = Latency{Min: ms(l[0]), P50: ms(rank(l, 0.50)), P90: ms(rank(l, 0.90)), P99: ms(rank(l, 0.99)), Max: ms(l[len(l)-1])}
	}
	for run, seqs := range t.runs {
		sorted := make([]uint64, 0, len(seqs))
		for s := range seqs {
			sorted = append(sorted, s)
		}
		slices.Sort(sorted)
		ru := RunStats{Run: run, FirstSeq: sorted[0], LastSeq: sorted[len(sorted)-1], Received: len(sorted)}
		for i := 1; i < len(sorted); i++ {
			if d := sorted[i] - sorted[i-1]; d > 1 {
				ru.Lost += int(d - 1)
				if len(ru.Gaps) < maxGaps {
					ru.Gaps = append(ru.Gaps, Gap{From: sorted[i-1] + 1, To: sorted[i] - 1})
				}
			}
		}
		r.Lost += ru.Lost
		r.Runs = append(r.Runs, ru)
	}
	slices.SortFunc(r.Runs, func(a, b RunStats) int { return strings.Compare(a.Run, b.Run) })
	return r
}

// rank returns the nearest-rank percentile p of sorted.
func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Formats are the output formats Write knows.
var Formats = []string{"table", "json"}

// Write renders r as format (one of Formats).
func (r Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "table":
		return r.writeTable(w)
	default:
		return fmt.Errorf("o: unknown output format %q, want one of %s", format, strings.Join(Formats, ", "))
	}
}

func (r Report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "broker\ttopic\tcount\tmsg/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tlost\tduplicates\tunparsable\t")
	fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%d\t\n", r.Broker, r.Topic, r.Count, r.Rate,
		r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max, r.Lost, r.Duplicates, r.Unparsable)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Want > 0 && r.Count < r.Want {
		fmt.Fprintf(w, "received %d of the %d messages asked for in %.0f ms\n", r.Count, r.Want, r.ElapsedMS)
	}
	for _, ru := range r.Runs {
		fmt.Fprintf(w, "run %s: seq %d..%d, %d received, %d lost", ru.Run, ru.FirstSeq, ru.LastSeq, ru.Received, ru.Lost)
		for i, g := range ru.Gaps {
			sep := ", "
			if i == 0 {
				sep = ": "
			}
			if g.From == g.To {
				fmt.Fprintf(w, "%s%d", sep, g.From)
			} else {
				fmt.Fprintf(w, "%s%d-%d", sep, g.From, g.To)
			}
		}
		if ru.Lost > 0 && len(ru.Gaps) == maxGaps {
			fmt.Fprint(w, ", …")
		}
		fmt.Fprintln(w)
	}
	return nil
}
