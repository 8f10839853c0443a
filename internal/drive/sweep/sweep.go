package sweep

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// Options say where a sweep runs and where its files go.
type Options struct {
	BaseURL string // the mqtarget to load, e.g. "http://127.0.0.1:8080"; overrides Spec.URL
	Dir     string // output directory, created if missing
	Version string // of this load generator
	// Target is what the base URL said about itself (load.Describe), recorded in every run's meta.
	Target *load.Target
	// Log, when set, gets one line per run.
	Log io.Writer
	// SpecText is the spec as read, copied into Dir/spec.yaml beside the results.
	SpecText []byte
}

// Output file names in Options.Dir.
const (
	ResultsCSV  = "results.csv"
	ResultsJSON = "results.json"
	Summary     = "summary.md"
	SpecCopy    = "spec.yaml"
)

// Outcome is what a sweep measured.
type Outcome struct {
	// Results are every run's result in order; with find_max, every step of every search.
	Results []*load.Result
	// Searches are, with find_max, each point's search (load -find-max's JSON), in order.
	Searches []*load.FindResult
}

func (out *Outcome) addSearch(fr *load.FindResult) {
	out.Searches = append(out.Searches, fr)
	for _, st := range fr.Steps {
		out.Results = append(out.Results, st.Result)
	}
}

// Execute runs spec's runs one after another and writes the results as they come (results.csv and
// results.json after every run, or with find_max every search, so an interrupted sweep keeps what it
// measured), then summary.md and the charts. It returns what was measured so far, and ctx's error when
// ctx ended early.
func Execute(ctx context.Context, spec Spec, o Options) (*Outcome, error) {
	out := &Outcome{}
	if spec.FindMax != nil {
		out.Searches = []*load.FindResult{}
	}
	base := o.BaseURL
	if base == "" {
		base = spec.URL
	}
	if _, err := load.ValidateURL(base); err != nil {
		return out, fmt.Errorf("url: %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return out, err
	}
	if o.SpecText != nil {
		if err := os.WriteFile(filepath.Join(o.Dir, SpecCopy), o.SpecText, 0o644); err != nil {
			return out, err
		}
	}
	runs := spec.Runs()
	for i, run := range runs {
		if ctx.Err() != nil {
			break
		}
		lo := load.Options{URL: RunURL(base, run), Method: spec.Method, Rate: run.Rate, RateTo: run.RateTo,
			Connections: run.Connections, MaxWorkers: spec.MaxWorkers, Duration: run.Duration, Warmup: spec.Warmup, Timeout: spec.Timeout,
			Target: o.Target, Version: o.Version}
		if spec.FindMax != nil {
			fr, err := load.FindMax(ctx, lo, spec.FindMax.FindOptions, func(st load.FindStep) {
				step := run
				step.Rate = st.Rate
				o.logRun(fmt.Sprintf("[%d/%d] %s", i+1, len(runs), step), st.Result, st.Verdict())
			})
			if err != nil {
				return out, fmt.Errorf("search %d of %d: %w", i+1, len(runs), err)
			}
			if o.Log != nil {
				answer := fr.Answer()
				if fr.Broke != "" {
					answer += "; broke at " + fr.Broke
				}
				fmt.Fprintf(o.Log, "[%d/%d] %s: %s\n", i+1, len(runs), run.Point(), answer)
			}
			if len(fr.Steps) > 0 {
				out.addSearch(fr)
			}
		} else {
			r, err := load.Run(ctx, lo)
			if err != nil {
				return out, fmt.Errorf("run %d of %d: %w", i+1, len(runs), err)
			}
			out.Results = append(out.Results, r)
			o.logRun(fmt.Sprintf("[%d/%d] %s", i+1, len(runs), run), r, "")
		}
		if err := writeResults(o.Dir, out); err != nil {
			return out, err
		}
	}
	if err := out.draw(o.Dir, spec, base, o); err != nil {
		return out, err
	}
	return out, ctx.Err()
}

// logRun writes one progress line: what ran, what it measured, and (with find_max) the verdict.
func (o Options) logRun(what string, r *load.Result, verdict string) {
	if o.Log == nil {
		return
	}
	lag := ""
	if r.Lag != nil && r.Service != nil {
		lag = fmt.Sprintf(" (service p99 %.2f ms, lag p99 %.2f ms)", r.Service.P99, r.Lag.P99)
	}
	if verdict != "" {
		verdict = ": " + verdict
	}
	fmt.Fprintf(o.Log, "%s: %.0f 2xx/s, p50 %.2f ms, p99 %.2f ms%s, by status %s, errors %d, not sent %d%s\n",
		what, r.Throughput, r.Latency.P50, r.Latency.P99, lag, r.StatusList(), r.Errors, r.NotSent, verdict)
}

// draw writes the charts and summary.md.
func (out *Outcome) draw(dir string, spec Spec, base string, o Options) error {
	var charts []string
	var err error
	if spec.FindMax != nil {
		charts, err = writeFindCharts(dir, spec.Title, out.Searches)
	} else {
		charts, err = writeCharts(dir, spec.Title, out.Results, xAxes)
	}
	if err != nil {
		return err
	}
	return writeSummary(dir, spec, base, o, out, charts)
}

// Failures name what measured nothing, for the sweep to fail on (exit 1): a run without a single 2xx
// answer (a wrong URL, broker or size; errors under overload are what a sweep measures); with
// find_max, a search no rate of which met the goal, and a step that met it without a 2xx answer (a
// goal on latency alone, and a target answering only errors). total counts what they are among.
func (out *Outcome) Failures() (failures []string, total int) {
	if out.Searches == nil {
		for i, r := range out.Results {
			if r.OK == 0 {
				failures = append(failures, fmt.Sprintf("run %d (%s %s): %v", i+1, r.Meta.Endpoint, r.Meta.Broker, r.Check(1)))
			}
		}
		return failures, len(out.Results)
	}
	for i, fr := range out.Searches {
		if why := fr.Failures(); len(why) > 0 {
			r := fr.Steps[0].Result
			failures = append(failures, fmt.Sprintf("search %d (%s %s): %s", i+1, r.Meta.Endpoint, r.Meta.Broker, strings.Join(why, "; ")))
		}
	}
	return failures, len(out.Searches)
}

// RunURL is the URL one run loads: base + endpoint with the broker, size and topics parameters.
func RunURL(base string, r Run) string {
	q := url.Values{}
	if r.Broker != "" {
		q.Set("broker", r.Broker)
	}
	if r.Size > 0 {
		q.Set("size", strconv.Itoa(r.Size))
	}
	if r.Topics > 0 {
		q.Set("topics", strconv.Itoa(r.Topics))
	}
	u := base + r.Endpoint
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// String is the run's short description for progress lines.
func (r Run) String() string {
	at := " rate=" + Rate{r.Rate, r.RateTo}.String() + "/s"
	if r.Connections > 0 {
		at = " connections=" + strconv.Itoa(r.Connections)
	}
	return r.describe(at)
}

// Point is a find_max point's short description: the run without its rate, which the search varies.
func (r Run) Point() string { return r.describe("") }

func (r Run) describe(at string) string {
	s := r.Endpoint
	if r.Broker != "" {
		s += " " + r.Broker
	}
	s += at
	if r.Size > 0 {
		s += " size=" + strconv.Itoa(r.Size)
	}
	if r.Topics > 0 {
		s += " topics=" + strconv.Itoa(r.Topics)
	}
	return s + " " + r.Duration.String()
}

// writeResults writes results.json (the runs' load JSON objects; with find_max, the searches' load
// -find-max JSON objects) and results.csv (a row per run; with find_max, per step, under
// load.FindCSVHeader).
func writeResults(dir string, out *Outcome) error {
	var v any = out.Results
	header, rows := load.CSVHeader, make([][]string, 0, len(out.Results))
	if out.Searches != nil {
		v, header = out.Searches, load.FindCSVHeader
		for _, fr := range out.Searches {
			rows = append(rows, fr.CSVRows()...)
		}
	} else {
		for _, r := range out.Results {
			rows = append(rows, r.CSVRow())
		}
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, ResultsJSON), append(js, '\n')); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, ResultsCSV))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(header)
	_ = w.WriteAll(rows)
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// writeFile replaces path's content through a temporary file, so a reader never sees half a file.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Replot redraws the charts and summary.md of a finished sweep in dir from its results.json and
// spec.yaml, e.g. after a change to the charts; no request is sent.
func Replot(dir string, knownBroker func(string) bool) (*Outcome, error) {
	text, err := os.ReadFile(filepath.Join(dir, SpecCopy))
	if err != nil {
		return nil, err
	}
	spec, err := Parse(text, knownBroker)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SpecCopy, err)
	}
	js, err := os.ReadFile(filepath.Join(dir, ResultsJSON))
	if err != nil {
		return nil, err
	}
	out := &Outcome{}
	if spec.FindMax != nil {
		var searches []*load.FindResult
		err = json.Unmarshal(js, &searches)
		for i, fr := range searches {
			if err == nil && (fr == nil || len(fr.Steps) == 0 || slices.ContainsFunc(fr.Steps, func(s load.FindStep) bool { return s.Result == nil })) {
				err = fmt.Errorf("search %d: no steps, or a step without its result (the spec has find_max: a list of searches is expected)", i+1)
			}
		}
		if err == nil {
			out.Searches = []*load.FindResult{}
			for _, fr := range searches {
				out.addSearch(fr)
			}
		}
	} else {
		err = json.Unmarshal(js, &out.Results)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ResultsJSON, err)
	}
	o := Options{Dir: dir}
	base := spec.URL
	if rs := out.Results; len(rs) > 0 {
		o.Version, o.Target = rs[0].Meta.Version, rs[0].Meta.Target
		if u, err := url.Parse(rs[0].Meta.URL); err == nil {
			base = u.Scheme + "://" + u.Host
		}
	}
	return out, out.draw(dir, spec, base, o)
}
