package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/drive/load"
	"github.com/mqtarget/mqtarget/internal/drive/sweep"
	"github.com/mqtarget/mqtarget/internal/serve"
	"github.com/mqtarget/mqtarget/internal/version"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

const sweepUsage = `usage: mqtarget sweep -o DIR [-url BASE] SPEC.yaml [settings]
       mqtarget sweep -o DIR -replot

Runs the load runs of a YAML spec one after another (axes: endpoints × brokers × connections or rates ×
sizes × topics × durations; see scripts/sweeps/) and writes DIR/results.csv, DIR/results.json (one
mqtarget load JSON object per run), DIR/summary.md and charts (PNG and SVG). With a find_max block
(rate, step, max_rate, slo: load -find-max's flags) every point is a search for the highest rate that
meets the goal instead: DIR/results.json then holds one load -find-max JSON object per point.

The runs go to -url, else the spec's url, else to a mqtarget started in this process on 127.0.0.1 with
embedded brokers for the spec's brokers; [settings] configure that one like mqtarget serve's flags.
Exit status: 0 after every run, 1 when the sweep failed or was interrupted or a run had no 2xx answer
at all, or a search found no rate meeting its goal (the files are written all the same), 2 for bad
input.

`

// runSweep is `mqtarget sweep`: a thin adapter over internal/drive/sweep.
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqtarget sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("o", "", "output directory (created if missing)")
	baseURL := fs.String("url", "", "base URL of a running mqtarget (overrides the spec's url)")
	replot := fs.Bool("replot", false, "redraw DIR's charts and summary.md from its results.json and spec.yaml; sends nothing")
	rest, code, done := parseSubcommand(fs, sweepUsage, args, stderr)
	if done {
		return code
	}
	bad := badInput(stderr, "mqtarget sweep")
	if *dir == "" {
		return bad("-o: the output directory is required")
	}
	known := func(name string) bool { return brokers.Lookup(name) != nil }
	if *replot {
		if len(rest) > 0 {
			return bad("-replot: takes no spec or settings, got %q", rest)
		}
		out, err := sweep.Replot(*dir, known)
		if err != nil {
			fmt.Fprintf(stderr, "mqtarget sweep: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%d runs replotted in %s\n", len(out.Results), *dir)
		return 0
	}
	if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		return bad("SPEC.yaml: the spec file is required after the flags")
	}
	specPath, settings := rest[0], rest[1:]
	text, err := readLimited(specPath, sweep.MaxSpecBytes)
	if err != nil {
		return bad("SPEC.yaml: %v", err)
	}
	spec, err := sweep.Parse(text, known)
	if err != nil {
		return bad("%s: %v", specPath, err)
	}
	if *baseURL != "" {
		if _, err := load.ValidateURL(*baseURL); err != nil {
			return bad("-url: %v", err)
		}
		spec.URL = strings.TrimRight(*baseURL, "/")
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "mqtarget sweep: %v\n", err)
		return 1
	}
	if spec.URL == "" {
		a, code := startForSweep(spec, settings, stderr)
		if a == nil {
			return code
		}
		defer func() {
			shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.Shutdown(shut); err != nil {
				fmt.Fprintf(stderr, "mqtarget sweep: in-process mqtarget: %v\n", err)
			}
		}()
		spec.URL = "http://" + a.Addr()
	} else if len(settings) > 0 {
		return bad("%q: settings configure the in-process mqtarget, and the spec has a url", settings)
	}
	describeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	target := load.Describe(describeCtx, spec.URL)
	cancel()
	if f := spec.FindMax; f != nil {
		fmt.Fprintf(stderr, "mqtarget sweep: %d find-max searches (up to %d steps each) against %s, at most %s of load\n",
			len(spec.Runs()), f.Steps(f.Rate), spec.URL, spec.TotalDuration())
	} else {
		fmt.Fprintf(stderr, "mqtarget sweep: %d runs against %s, %s of load\n", len(spec.Runs()), spec.URL, spec.TotalDuration())
	}
	out, err := sweep.Execute(ctx, spec, sweep.Options{Dir: *dir, Version: version.Get().Version, Target: target, Log: stderr, SpecText: text})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%d runs: %s/%s, %s, %s\n", len(out.Results), *dir, sweep.ResultsCSV, sweep.ResultsJSON, sweep.Summary)
	// Errors under overload are what a sweep measures, but a run without a single 2xx measured nothing
	// (a wrong URL, broker or size), and a search that found no rate meeting its goal answered nothing:
	// the sweep failed there.
	failures, total := out.Failures()
	for _, f := range failures {
		fmt.Fprintf(stderr, "mqtarget sweep: %s\n", f)
	}
	if len(failures) > 0 {
		what := "runs had no 2xx answer"
		if spec.FindMax != nil {
			what = "searches found no rate meeting the goal, or met it without a 2xx answer"
		}
		fmt.Fprintf(stderr, "mqtarget sweep: %d of %d %s\n", len(failures), total, what)
		return 1
	}
	return 0
}

// startForSweep starts a mqtarget on 127.0.0.1 with embedded servers for the spec's brokers (nil and the
// exit code when it cannot).
func startForSweep(spec sweep.Spec, settings []string, stderr io.Writer) (*serve.App, int) {
	cfg, code, ok := sweepConfig(spec, settings, stderr)
	if !ok {
		return nil, code
	}
	a, err := serve.Start(cfg, newLogger(cfg.Log, stderr))
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget sweep: in-process mqtarget: %v\n", err)
		return nil, 1
	}
	return a, 0
}

// sweepConfig is the configuration of the in-process mqtarget for spec: settings, the spec's first
// broker the default and the others without addresses embedded beside it (false and the exit code
// when there is none: -help, bad settings, a broker nothing can serve).
func sweepConfig(spec sweep.Spec, settings []string, stderr io.Writer) (config.Config, int, bool) {
	bad := badInput(stderr, "mqtarget sweep")
	loadConfig := func(args []string) (config.Config, error) {
		base := []string{"-http.addr", "127.0.0.1:0", "-log.level", "warn"}
		cfg, _, err := config.Load(config.Sources{Args: append(append(base, args...), settings...), LookupEnv: os.LookupEnv,
			Environ: os.Environ, ReadFile: os.ReadFile, Output: stderr})
		return cfg, err
	}
	// First the settings alone, to tell a broker nothing can serve from a bad setting.
	cfg, err := loadConfig(nil)
	if errors.Is(err, flag.ErrHelp) {
		return cfg, 0, false
	}
	if err != nil {
		return cfg, bad("settings: %v", err), false
	}
	for i, name := range spec.Axes.Brokers {
		b := brokers.Lookup(name)
		if len(b.Addrs(&cfg.Sections)) == 0 && b.Embedded(&cfg.Sections) == 0 {
			return cfg, bad("axes.brokers[%d]: %s has no embedded server; give the spec a url (a mqtarget serving it) or -%s",
				i, name, b.AddrsSetting()), false
		}
	}
	if b := spec.Axes.Brokers; len(b) > 0 {
		// The first broker is the default; the others without addresses run embedded beside it.
		args := []string{"-broker", b[0]}
		var embedded []string
		for _, name := range b[1:] {
			if len(brokers.Lookup(name).Addrs(&cfg.Sections)) == 0 {
				embedded = append(embedded, name)
			}
		}
		if len(embedded) > 0 {
			args = append(args, "-embedded_brokers", strings.Join(embedded, ","))
		}
		if cfg, err = loadConfig(args); err != nil {
			return cfg, bad("settings: %v", err), false
		}
	}
	return cfg, 0, true
}
