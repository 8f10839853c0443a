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
	"strconv"

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

// Execute runs spec's runs one after another and writes the results as they come (results.csv and
// results.json after every run, so an interrupted sweep keeps what it measured), then summary.md and the
// charts. It returns the results so far and ctx's error when ctx ended early.
func Execute(ctx context.Context, spec Spec, o Options) ([]*load.Result, error) {
	base := o.BaseURL
	if base == "" {
		base = spec.URL
	}
	if _, err := load.ValidateURL(base); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if o.SpecText != nil {
		if err := os.WriteFile(filepath.Join(o.Dir, SpecCopy), o.SpecText, 0o644); err != nil {
			return nil, err
		}
	}
	runs := spec.Runs()
	var results []*load.Result
	for i, run := range runs {
		if ctx.Err() != nil {
			break
		}
		r, err := load.Run(ctx, load.Options{URL: RunURL(base, run), Method: spec.Method, Rate: run.Rate, RateTo: run.RateTo,
			Connections: run.Connections, MaxWorkers: spec.MaxWorkers, Duration: run.Duration, Warmup: spec.Warmup, Timeout: spec.Timeout,
			Target: o.Target, Version: o.Version})
		if err != nil {
			return results, fmt.Errorf("run %d of %d: %w", i+1, len(runs), err)
		}
		results = append(results, r)
		if o.Log != nil {
			lag := ""
			if r.Lag != nil && r.Service != nil {
				lag = fmt.Sprintf(" (service p99 %.2f ms, lag p99 %.2f ms)", r.Service.P99, r.Lag.P99)
			}
			fmt.Fprintf(o.Log, "[%d/%d] %s: %.0f 2xx/s, p50 %.2f ms, p99 %.2f ms%s, by status %s, errors %d, not sent %d\n",
				i+1, len(runs), run, r.Throughput, r.Latency.P50, r.Latency.P99, lag, r.StatusList(), r.Errors, r.NotSent)
		}
		if err := writeResults(o.Dir, results); err != nil {
			return results, err
		}
	}
	charts, err := writeCharts(o.Dir, spec.Title, results)
	if err != nil {
		return results, err
	}
	if err := writeSummary(o.Dir, spec, base, o, results, charts); err != nil {
		return results, err
	}
	return results, ctx.Err()
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
	s := r.Endpoint
	if r.Broker != "" {
		s += " " + r.Broker
	}
	if r.Connections > 0 {
		s += " connections=" + strconv.Itoa(r.Connections)
	} else {
		s += " rate=" + Rate{r.Rate, r.RateTo}.String() + "/s"
	}
	if r.Size > 0 {
		s += " size=" + strconv.Itoa(r.Size)
	}
	if r.Topics > 0 {
		s += " topics=" + strconv.Itoa(r.Topics)
	}
	return s + " " + r.Duration.String()
}

func writeResults(dir string, results []*load.Result) error {
	js, err := json.MarshalIndent(results, "", "  ")
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
	_ = w.Write(load.CSVHeader)
	for _, r := range results {
		_ = w.Write(r.CSVRow())
	}
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
func Replot(dir string, knownBroker func(string) bool) ([]*load.Result, error) {
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
	var results []*load.Result
	if err := json.Unmarshal(js, &results); err != nil {
		return nil, fmt.Errorf("%s: %w", ResultsJSON, err)
	}
	charts, err := writeCharts(dir, spec.Title, results)
	if err != nil {
		return results, err
	}
	o := Options{Dir: dir}
	base := spec.URL
	if len(results) > 0 {
		o.Version, o.Target = results[0].Meta.Version, results[0].Meta.Target
		if u, err := url.Parse(results[0].Meta.URL); err == nil {
			base = u.Scheme + "://" + u.Host
		}
	}
	return results, writeSummary(dir, spec, base, o, results, charts)
}
