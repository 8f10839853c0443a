package load

import (
	"context"
	"errors"
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

// Validate checks the search's options against o's.
func (f FindOptions) Validate(o Options) error {
	switch {
	case o.Rate == 0:
		return errors.New("-find-max: needs the open model (-rate, the first step's rate)")
	case o.RateTo > 0:
		return errors.New("-find-max: steps at constant rates, not a ramp")
	case o.Shards > 0:
		return errors.New("-find-max: judges each step's whole load, so it runs in one process, not with -shard")
	case f.Step < 1 || f.Step > MaxRate:
		return fmt.Errorf("-step: must be 1..%d, got %d", MaxRate, f.Step)
	case f.MaxRate < o.Rate || f.MaxRate > MaxRate:
		return fmt.Errorf("-max-rate: must be %d (-rate)..%d, got %d", o.Rate, MaxRate, f.MaxRate)
	case (f.MaxRate-o.Rate)/f.Step+1 > MaxSteps:
		return fmt.Errorf("-step: %d steps from %d to %d, at most %d", (f.MaxRate-o.Rate)/f.Step+1, o.Rate, f.MaxRate, MaxSteps)
	case len(f.SLO.terms) == 0:
		return errors.New("-slo: a goal is needed, e.g. 'p99<10ms,errors<0.1%'")
	}
	return o.Validate()
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

// WriteTable prints the search as one row per step and the answer.
func (fr *FindResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\t2xx/s\tp50 ms\tp99 ms\tp99.9 ms\terrors\tnot sent\tgoal "+fr.SLO+"\t")
	for _, s := range fr.Steps {
		r := s.Result
		goal := "met"
		if !s.Met {
			goal = "broken: " + s.Why
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%s\t\n", s.Rate, r.Throughput, r.Latency.P50, r.Latency.P99,
			r.Latency.P999, r.NonOK()+r.Errors, r.NotSent, goal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	answer := "max rate " + strconv.Itoa(fr.MaxRate) + "/s meets " + fr.SLO
	if fr.MaxRate == 0 {
		answer = "no rate met " + fr.SLO
	}
	if fr.Broke == "" {
		answer += " (the last step; higher was not tried)"
	}
	_, err := fmt.Fprintln(w, answer)
	return err
}
