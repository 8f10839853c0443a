// Command mqtarget serves HTTP endpoints that publish to message brokers, for load-testing them with
// wrk, wrk2 or hey. With no broker configured it starts the default broker's embedded servers.
//
// Subcommands: serve (the default, when the first argument is not a subcommand's name), consume,
// roundtrip, load, sweep, healthcheck and version.
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
		}
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
var interruptible = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) int{
	"consume":   runConsume,
	"roundtrip": runRoundTrip,
	"load":      runLoad,
	"sweep":     runSweep,
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
