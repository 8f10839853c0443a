// Command mqtarget serves HTTP endpoints that publish to message brokers, for load-testing them with
// wrk, wrk2 or hey. With no broker configured it starts the default broker's embedded servers.
//
// Subcommands: serve (the default, when the first argument is not a subcommand's name), consume,
// roundtrip, load, report, sweep, healthcheck, version and help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/serve"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if sub, ok := interruptible[args[0]]; ok {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return sub(ctx, args[1:], stdout, stderr)
		}
		switch args[0] {
		case "serve":
			args = args[1:]
		case "healthcheck":
			return runHealthcheck(context.Background(), args[1:], stdout, stderr)
		case "version":
			return printVersion(stdout)
		case "help":
			fmt.Fprint(stdout, subcommandsHelp)
			return 0
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "--h" }) {
		fmt.Fprint(stderr, subcommandsHelp) // the settings follow, printed by the flag set
	}
	cfg, opts, err := config.Load(config.Sources{
		Args:      args,
		LookupEnv: os.LookupEnv,
		Environ:   os.Environ,
		ReadFile:  os.ReadFile,
		Output:    stderr,
	})
	if errors.Is(err, flag.ErrHelp) {
		return 0 // -h: usage was printed
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget: %v\n", err)
		return 2
	}
	if opts.Version {
		return printVersion(stdout)
	}
	if opts.PrintConfig {
		out, err := cfg.YAML()
		if err != nil {
			fmt.Fprintf(stderr, "mqtarget: %v\n", err)
			return 1
		}
		_, _ = stdout.Write(out)
		return 0
	}
	log := newLogger(cfg.Log, stderr)
	if _, set := os.LookupEnv("GOGC"); !set && cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cfg.GCMemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.GCMemoryLimit)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := serve.Start(cfg, log)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// interruptible are the subcommands that end early, cleanly, on SIGINT or SIGTERM (through ctx).
const subcommandsHelp = `usage: mqtarget [serve] [-SETTING VALUE...]   serve every endpoint on :8080 (the default)
       mqtarget load [flags] URL                drive an endpoint: closed or open model, shards, -find-max
       mqtarget report RESULT.json...           merge the results of sharded loads exactly
       mqtarget sweep -o DIR SPEC.yaml          runs over a grid of parameters, with charts
       mqtarget consume [flags]                 read a topic, count losses and duplicates by run id
       mqtarget roundtrip [flags]               publish, echo back, measure the round trip
       mqtarget healthcheck [ADDR]              exit 0 when ADDR's /healthz (or -path /readyz) is 2xx
       mqtarget version                         this build's version, revision and Go version
       mqtarget help                            this list

mqtarget SUBCOMMAND -h describes a subcommand's flags; mqtarget -h lists serve's settings (each also a
YAML key and an MQTARGET_* variable).

`

var interruptible = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"consume":   runConsume,
	"roundtrip": runRoundTrip,
	"load":      runLoad,
	"sweep":     runSweep,
	"report":    runReport,
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		// slog's JSON handler writes a duration as integer nanoseconds ("took":202000000); log readers
		// get Go's text form instead ("took":"202ms"), as the text handler prints it.
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
