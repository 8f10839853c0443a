package load

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// FindOptions drive FindMax: the first rate is Options.Rate, then Step more each time, up to MaxRate.
type FindOptions struct {
	Step    int
	MaxRate int
	SLO     SLO
}

// MaxSteps bounds a search's steps.
const MaxSteps = 1000

// FindResult is a search: the highest rate whose run met the goal (0: not even the first), and every
// step's result.
type FindResult struct {
	MaxRate int    `json:"max_rate"`
	SLO     string `json:"slo"`
	// Broke says why the first step that broke the goal did (empty: MaxRate was reached).
	Broke string     `json:"broke,omitempty"`
	Steps []FindStep `json:"steps"`
}

// FindStep is one rate's run.
type FindStep struct {
	Rate   int     `json:"rate"`
	Met    bool    `json:"met"`
	Why    string  `json:"why,omitempty"`
	Result *Result `json:"result"`
}

// Failures say why the search measured nothing, empty when it did: no rate met the goal, or a step met
// it without a single 2xx answer (a goal on latency alone, and a target answering only errors: a wrong
// URL, broker or size). A search with failures fails its command (exit 1).
func (fr *FindResult) Failures() []string {
	var why []string
	if fr.MaxRate == 0 {
		why = append(why, "no rate met "+fr.SLO+" ("+fr.Broke+")")
	}
	for _, st := range fr.Steps {
		if st.Met && st.Result.OK == 0 {
			why = append(why, fmt.Sprintf("%d/s met the goal with %v", st.Rate, st.Result.Check(1)))
		}
	}
	return why
}

// Verdict is the step's judgement in words: "met", or "broken: " and why.
func (s FindStep) Verdict() string {
	if s.Met {
		return "met"
	}
	return "broken: " + s.Why
}

// Validate checks the search's options against o's, naming each as load's flag (-step, -max-rate, …).
func (f FindOptions) Validate(o Options) error {
	if err := f.Check(o, func(flag string) string { return "-" + flag }); err != nil {
		return err
	}
	return o.Validate()
}

// Check checks the search's own options against o's rate and model, naming each option by
// name(flag), flag one of find-max, rate, step, max-rate, slo: a sweep spec names them as its keys.
func (f FindOptions) Check(o Options, name func(flag string) string) error {
	switch {
	case o.Rate == 0:
		return fmt.Errorf("%s: needs the open model (%s, the first step's rate)", name("find-max"), name("rate"))
	case o.RateTo > 0:
		return fmt.Errorf("%s: steps at constant rates, not a ramp", name("find-max"))
	case o.Shards > 0:
		return fmt.Errorf("%s: judges each step's whole load, so it runs in one process, not with -shard", name("find-max"))
	case f.Step < 1 || f.Step > MaxRate:
		return fmt.Errorf("%s: must be 1..%d, got %d", name("step"), MaxRate, f.Step)
	case f.MaxRate < o.Rate || f.MaxRate > MaxRate:
		return fmt.Errorf("%s: must be %d (%s)..%d, got %d", name("max-rate"), o.Rate, name("rate"), MaxRate, f.MaxRate)
	case f.Steps(o.Rate) > MaxSteps:
		return fmt.Errorf("%s: %d steps from %d to %d, at most %d", name("step"), f.Steps(o.Rate), o.Rate, f.MaxRate, MaxSteps)
	case len(f.SLO.terms) == 0:
		return fmt.Errorf("%s: a goal is needed, e.g. 'p99<10ms,errors<0.1%%'", name("slo"))
	}
	return nil
}

// Steps is how many steps a search from rate runs when no step breaks the goal (f.Step >= 1).
func (f FindOptions) Steps(rate int) int {
	if f.MaxRate < rate {
		return 0
	}
	return (f.MaxRate-rate)/f.Step + 1
}

// FindMax runs o at rising rates (o.Rate, then f.Step more each time, each for o.Duration after
// o.Warmup) until a run breaks f.SLO or f.MaxRate was run, and reports the highest rate that met it.
// step, when set, is called after each step.
func FindMax(ctx context.Context, o Options, f FindOptions, step func(FindStep)) (*FindResult, error) {
	if err := f.Validate(o); err != nil {
		return nil, err
	}
	fr := &FindResult{SLO: f.SLO.String(), Steps: []FindStep{}}
	for rate := o.Rate; rate <= f.MaxRate && ctx.Err() == nil; rate += f.Step {
		ro := o
		ro.Rate = rate
		if len(fr.Steps) > 0 {
			ro.StartAt = time.Time{} // only the first step waits for -start-at
		}
		r, err := Run(ctx, ro)
		if err != nil {
			return nil, err
		}
		met, why := f.SLO.Check(r)
		if r.Meta.Interrupted {
			met, why = false, "interrupted"
		}
		s := FindStep{Rate: rate, Met: met, Why: why, Result: r}
		fr.Steps = append(fr.Steps, s)
		if step != nil {
			step(s)
		}
		if !met {
			fr.Broke = fmt.Sprintf("%d/s: %s", rate, why)
			break
		}
		fr.MaxRate = rate
	}
	return fr, nil
}

// FindCSVHeader names the columns of CSVRows: the search's answer and the step's verdict, then the
// step's run as a load result's CSV row.
var FindCSVHeader = append([]string{"max_rate", "met"}, CSVHeader...)

// CSVRows is the search as one row per step under FindCSVHeader.
func (fr *FindResult) CSVRows() [][]string {
	rows := make([][]string, len(fr.Steps))
	for i, s := range fr.Steps {
		rows[i] = append([]string{strconv.Itoa(fr.MaxRate), strconv.FormatBool(s.Met)}, s.Result.CSVRow()...)
	}
	return rows
}

// WriteTable prints the search as one row per step and the answer.
func (fr *FindResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\t2xx/s\tp50 ms\tp99 ms\tp99.9 ms\terrors\tnot sent\tgoal "+fr.SLO+"\t")
	for _, s := range fr.Steps {
		r := s.Result
		fmt.Fprintf(tw, "%d\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%s\t\n", s.Rate, r.Throughput, r.Latency.P50, r.Latency.P99,
			r.Latency.P999, r.NonOK()+r.Errors, r.NotSent, s.Verdict())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, fr.Answer())
	return err
}

// Answer is the search's outcome in words: the max rate and the goal, or that no rate met it.
func (fr *FindResult) Answer() string {
	answer := "max rate " + strconv.Itoa(fr.MaxRate) + "/s meets " + fr.SLO
	if fr.MaxRate == 0 {
		answer = "no rate met " + fr.SLO
	}
	if fr.Broke == "" {
		answer += " (the last step; higher was not tried)"
	}
	return answer
}
