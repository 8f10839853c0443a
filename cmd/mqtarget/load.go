package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
	"github.com/mqtarget/mqtarget/internal/version"
)

const loadUsage = `usage: mqtarget load [-rate R | -connections C] -duration D [-method M] [-body TEXT|@FILE] [-timeout D] [-max-workers N] [-max-error-rate F] [-o table|json|csv] URL

Sends requests to URL for -duration and reports requests, 2xx answers (ok), answers by status (with up
to 3 sample bodies of each non-2xx status), transport errors, throughput (2xx per second only) and
latency percentiles in milliseconds.

  -connections C  closed model: C connections, each sends its next request when its answer arrived (wrk).
  -rate R         open model: R requests per second whatever the answers do (wrk2). latency_ms counts
                  from each request's intended send time, so a stall of the target shows in the
                  percentiles; service_ms from the actual send (what wrk, hey and vegeta show); lag_ms
                  from intended to actual send (the generator's own lateness).

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
	rate := fs.Int("rate", 0, "open model: requests per second")
	conns := fs.Int("connections", 0, "closed model: concurrent connections")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	method := fs.String("method", http.MethodGet, "HTTP method: GET, POST, PUT or HEAD")
	body := fs.String("body", "", "request body: the text itself, or @FILE for a file's content")
	timeout := fs.Duration("timeout", load.DefaultTimeout, "per-request timeout (then it counts as an error)")
	maxWorkers := fs.Int("max-workers", 0, fmt.Sprintf("open model: requests in flight at most (0: %d)", load.DefaultMaxWorkers))
	maxErrorRate := fs.Float64("max-error-rate", load.DefaultMaxErrorRate, "share of requests (0..1) answered non-2xx or not at all above which the run failed (exit 1)")
	format := fs.String("o", "table", "output format: "+strings.Join(load.Formats, ", "))
	cpuProfile := fs.String("cpuprofile", "", "write the generator's own CPU profile to this file (go tool pprof reads it)")
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
	o := load.Options{URL: urls[0], Method: strings.ToUpper(*method), Body: payload, Rate: *rate, Connections: *conns,
		MaxWorkers: *maxWorkers, Duration: *duration, Timeout: *timeout, Version: version.Get().Version}
	if err := o.Validate(); err != nil {
		return bad("%v", err)
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
