package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/chart"
	"github.com/mqtarget/mqtarget/internal/drive/load"
	"github.com/mqtarget/mqtarget/internal/version"
)

const loadUsage = `usage: mqtarget load [-rate R[:R2] | -connections C] -duration D [-warmup D] [-shard I/N] [-start-at TIME]
       [-method M] [-body TEXT|@FILE] [-timeout D] [-max-workers N] [-max-error-rate F] [-o table|json|csv] URL
       mqtarget load -find-max -rate R -step S [-max-rate M] -slo GOAL [-chart DIR] -duration D [...] URL

Sends requests to URL for -duration and reports requests, 2xx answers (ok), answers by status (with up
to 3 sample bodies of each non-2xx status), transport errors, throughput (2xx per second only) and
latency percentiles in milliseconds.

  -connections C  closed model: C connections, each sends its next request when its answer arrived (wrk).
  -rate R         open model: R requests per second whatever the answers do (wrk2). latency_ms counts
                  from each request's intended send time, so a stall of the target shows in the
                  percentiles; service_ms from the actual send (what wrk, hey and vegeta show); lag_ms
                  from intended to actual send (the generator's own lateness). -rate R:R2 ramps
                  linearly from R to R2 over -duration.
  -warmup D       send for D first (at R in the open model) and count it apart ("warmup" in the JSON).
  -shard I/N      this process is shard I (from 0, as a Kubernetes Indexed Job's JOB_COMPLETION_INDEX) of
                  N sending one load: it sends every N-th request of the open model's schedule, or its
                  share of the connections. -start-at TIME (RFC 3339, or Unix seconds) starts the
                  shards together; mqtarget report merges their JSON results exactly.
  -find-max       run -rate, then -step more each time (each for -warmup + -duration), until a step
                  breaks -slo (e.g. 'p99<10ms,errors<0.1%'); prints every step and max_rate, the
                  highest rate that met it; -chart DIR draws latency percentiles against rate.

When URL is a mqtarget, its version and effective configuration (GET /config, secrets redacted) and its
broker setup (GET /) go into the JSON's meta. Requests go only to URL's host: no proxy from the
environment, no redirect followed (a 3xx is counted as an answer). A progress line is printed on stderr
when it is a terminal. Exit status: 0 after a run; 1 when it could not run, or when no answer was 2xx,
or when more than -max-error-rate of the requests were answered non-2xx or not at all (the result is
printed all the same); 2 for bad input.

`

// runLoad is `mqtarget load`: a thin adapter over internal/drive/load.
func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqtarget load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rate rateFlag
	fs.Var(&rate, "rate", "open model: requests per second (R:R2: a ramp from R to R2 over -duration)")
	conns := fs.Int("connections", 0, "closed model: concurrent connections")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	method := fs.String("method", http.MethodGet, "HTTP method: GET, POST, PUT or HEAD")
	body := fs.String("body", "", "request body: the text itself, or @FILE for a file's content")
	timeout := fs.Duration("timeout", load.DefaultTimeout, "per-request timeout (then it counts as an error)")
	maxWorkers := fs.Int("max-workers", 0, fmt.Sprintf("open model: requests in flight at most (0: %d)", load.DefaultMaxWorkers))
	maxErrorRate := fs.Float64("max-error-rate", load.DefaultMaxErrorRate, "share of requests (0..1) answered non-2xx or not at all above which the run failed (exit 1)")
	format := fs.String("o", "table", "output format: "+strings.Join(load.Formats, ", "))
	cpuProfile := fs.String("cpuprofile", "", "write the generator's own CPU profile to this file (go tool pprof reads it)")
	warmup := fs.Duration("warmup", 0, "send for this long first and count it apart")
	shard := fs.String("shard", "", "I/N: this process is shard I (from 0) of N sending one load")
	startAt := fs.String("start-at", "", "begin at this time (RFC 3339, or Unix seconds), so shards start together")
	findMax := fs.Bool("find-max", false, "raise the rate by -step until -slo breaks; report the highest rate that met it")
	step := fs.Int("step", 0, "-find-max: the rate added each step (0: -rate)")
	maxRate := fs.Int("max-rate", 0, fmt.Sprintf("-find-max: the highest rate tried (0: as far as %d steps go, at most %d)", load.MaxSteps, load.MaxRate))
	sloText := fs.String("slo", "", "-find-max: the goal, e.g. 'p99<10ms,errors<0.1%'")
	chartDir := fs.String("chart", "", "-find-max: draw latency percentiles against rate into DIR/find-max.{png,svg}")
	fs.Usage = func() {
		fmt.Fprint(stderr, loadUsage)
		fs.PrintDefaults()
	}
	urls, code, done := parseInterleaved(fs, args)
	if done {
		return code
	}
	bad := badInput(stderr, "mqtarget load")
	if len(urls) != 1 {
		return bad("one URL expected, got %d: %q", len(urls), urls)
	}
	if !slices.Contains(load.Formats, *format) {
		return bad("-o: unknown output format %q, want %s", *format, strings.Join(load.Formats, ", "))
	}
	if !(*maxErrorRate >= 0 && *maxErrorRate <= 1) { // NaN too
		return bad("-max-error-rate: must be 0..1, got %v", *maxErrorRate)
	}
	var payload []byte
	if name, ok := strings.CutPrefix(*body, "@"); ok {
		b, err := readLimited(name, load.MaxBodyBytes)
		if err != nil {
			return bad("-body: %v", err)
		}
		payload = b
	} else if *body != "" {
		payload = []byte(*body)
	}
	o := load.Options{URL: urls[0], Method: strings.ToUpper(*method), Body: payload, Rate: rate.from, RateTo: rate.to,
		Connections: *conns, MaxWorkers: *maxWorkers, Duration: *duration, Timeout: *timeout, Warmup: *warmup,
		Version: version.Get().Version}
	if *shard != "" {
		i, n, err := load.ParseShard(*shard)
		if err != nil {
			return bad("-shard: %v", err)
		}
		o.Shard, o.Shards = i, n
	}
	if *startAt != "" {
		t, err := parseStartAt(*startAt)
		if err != nil {
			return bad("-start-at: %v", err)
		}
		o.StartAt = t
	}
	var find *load.FindOptions
	if *findMax {
		slo, err := load.ParseSLO(*sloText)
		if err != nil {
			return bad("-slo: %v", err)
		}
		find = &load.FindOptions{Step: *step, MaxRate: *maxRate, SLO: slo}
		if find.Step == 0 {
			find.Step = o.Rate
		}
		if find.MaxRate == 0 && find.Step > 0 && o.Rate > 0 {
			// as far as the step bound allows, so -rate and -step alone make a valid search
			find.MaxRate = int(min(int64(load.MaxRate), int64(o.Rate)+int64(load.MaxSteps-1)*int64(find.Step)))
		}
		if err := find.Validate(o); err != nil {
			return bad("%v", err)
		}
	} else {
		for _, f := range []string{"step", "max-rate", "slo", "chart"} {
			if isSet(fs, f) {
				return bad("-%s: only with -find-max", f)
			}
		}
		if err := o.Validate(); err != nil {
			return bad("%v", err)
		}
	}
	if isTerminal(stderr) {
		o.Progress = func(p load.Progress) {
			fmt.Fprintf(stderr, "\r%5.1fs / %s  requests %d  ok %d  ", p.Elapsed.Seconds(), p.Duration, p.Requests, p.OK)
		}
	}
	describeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	o.Target = load.Describe(describeCtx, o.URL)
	cancel()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return bad("-cpuprofile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return bad("-cpuprofile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	if find != nil {
		return findMaxRate(ctx, o, *find, *format, *chartDir, stdout, stderr)
	}
	r, err := load.Run(ctx, o)
	if o.Progress != nil {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget load: %v\n", err)
		return 1
	}
	if err := r.Write(stdout, *format); err != nil {
		fmt.Fprintf(stderr, "mqtarget load: %v\n", err)
		return 1
	}
	if err := r.Check(*maxErrorRate); err != nil {
		fmt.Fprintf(stderr, "mqtarget load: failed: %v\n", err)
		return 1
	}
	return 0
}

// rateFlag is -rate: R, or R:R2 for a ramp.
type rateFlag struct{ from, to int }

func (r *rateFlag) String() string {
	if r.to > 0 {
		return fmt.Sprintf("%d:%d", r.from, r.to)
	}
	return strconv.Itoa(r.from)
}

func (r *rateFlag) Set(s string) error {
	from, to, err := load.ParseRate(s)
	if err != nil {
		return err
	}
	r.from, r.to = from, to
	return nil
}

// parseStartAt reads -start-at: RFC 3339 (2026-12-01T12:00:00Z) or Unix seconds (1796126400).
func parseStartAt(s string) (time.Time, error) {
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		if secs < 0 || secs > 1<<40 {
			return time.Time{}, fmt.Errorf("%q: Unix seconds out of range", s)
		}
		return time.Unix(secs, 0), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-12-01T12:00:00Z) or Unix seconds", s)
	}
	return t, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// findMaxRate is load -find-max: the search, printed as format, the chart when asked.
func findMaxRate(ctx context.Context, o load.Options, f load.FindOptions, format, chartDir string, stdout, stderr io.Writer) int {
	progress := func(s load.FindStep) {
		fmt.Fprintf(stderr, "mqtarget load: %d/s: p99 %.3f ms, %d of %d 2xx: %s\n", s.Rate, s.Result.Latency.P99, s.Result.OK, s.Result.Requests, s.Verdict())
	}
	fr, err := load.FindMax(ctx, o, f, progress)
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget load: %v\n", err)
		return 1
	}
	switch format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(fr)
	case "csv":
		cw := csv.NewWriter(stdout)
		_ = cw.Write(load.FindCSVHeader)
		_ = cw.WriteAll(fr.CSVRows())
		cw.Flush()
		err = cw.Error()
	default:
		err = fr.WriteTable(stdout)
	}
	if err == nil && chartDir != "" {
		var paths []string
		if err = os.MkdirAll(chartDir, 0o755); err == nil {
			paths, err = chart.Write(chartDir, "find-max", findMaxChart(fr))
		}
		for _, p := range paths {
			fmt.Fprintf(stderr, "mqtarget load: wrote %s\n", p)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget load: %v\n", err)
		return 1
	}
	if why := fr.Failures(); len(why) > 0 {
		fmt.Fprintf(stderr, "mqtarget load: failed: %s\n", strings.Join(why, "; "))
		return 1
	}
	return 0
}

// findMaxChart: latency percentiles (from due) against the offered rate, one line each.
func findMaxChart(fr *load.FindResult) chart.Chart {
	c := chart.Chart{Title: "latency against rate, goal " + fr.SLO, XLabel: "offered rate (requests/s)", YLabel: "latency from due (ms)", LogY: true}
	for i, p := range []struct {
		name string
		get  func(load.Latency) float64
	}{{"p50", func(l load.Latency) float64 { return l.P50 }}, {"p99", func(l load.Latency) float64 { return l.P99 }},
		{"p99.9", func(l load.Latency) float64 { return l.P999 }}} {
		s := chart.Series{Name: p.name, Dash: i}
		for _, st := range fr.Steps {
			s.X = append(s.X, float64(st.Rate))
			s.Y = append(s.Y, max(p.get(st.Result.Latency), 0.001))
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// readLimited reads a file named on the command line (a -body @FILE, a sweep spec), refusing one larger
// than limit bytes before reading it all: a device or a huge file would take the memory.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return b, nil
}

// parseInterleaved parses fs's flags from args wherever they stand among the positional arguments
// (`load URL -rate 10` as well as `load -rate 10 URL`) and returns the positional ones. done says to
// return code now: 0 after -h, 2 after a bad flag (the flag package named it).
func parseInterleaved(fs *flag.FlagSet, args []string) (positional []string, code int, done bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, 0, true
			}
			return nil, 2, true
		}
		if fs.NArg() == 0 {
			return positional, 0, false
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
