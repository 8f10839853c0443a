package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/drive/consume"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

var consumeUsage = `usage: mqtarget consume [-broker B] [-topic T] [-count N] [-duration D] [-o table|json] [-group G] [settings]

Reads topic T of broker B (the broker and topic settings) and reports how many messages arrived, the
rate, end-to-end latency percentiles from the payloads' send times, ids lost (gaps per producer run) and
duplicates. It stops after -count messages, after -duration, or on SIGINT/SIGTERM. Exit status: 0 when
nothing was lost or duplicated and -count was reached, 1 otherwise, 2 for bad input.

The broker's addresses come from the same settings, environment and config file as the service
(` + addrsFlags() + `, ...; see mqtarget -h); they must name running
brokers, since embedded ones live inside mqtarget serve.

`

// addrsFlags lists the brokers' address flags: "-a.hosts, -b.name_servers".
func addrsFlags() string {
	var flags []string
	for _, b := range brokers.List {
		flags = append(flags, "-"+b.AddrsSetting())
	}
	return strings.Join(flags, ", ")
}

// runConsume is `mqtarget consume`: a thin adapter over internal/drive/consume.
func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqtarget consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	count := fs.Int("count", 0, "stop after this many messages (0: no limit)")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	format := fs.String("o", "table", "output format: "+strings.Join(consume.Formats, " or "))
	group := fs.String("group", publishers.DefaultConsumerGroup, brokers.Groups())
	rest, code, done := parseSubcommand(fs, consumeUsage, args, stderr)
	if done {
		return code
	}
	bad := badInput(stderr, "mqtarget consume")
	switch {
	case *count < 0:
		return bad("-count: must be 0 (no limit) or more, got %d", *count)
	case *duration < 0:
		return bad("-duration: must be 0 (no limit) or more, got %v", *duration)
	case !slices.Contains(consume.Formats, *format):
		return bad("-o: unknown output format %q, want %s", *format, strings.Join(consume.Formats, " or "))
	}
	cfg, _, err := config.Load(config.Sources{Args: rest, LookupEnv: os.LookupEnv, Environ: os.Environ, ReadFile: os.ReadFile, Output: stderr})
	if err != nil {
		return bad("%v", err)
	}
	b := brokers.Lookup(cfg.Broker) // config.Load validated the name
	addrs := b.Addrs(&cfg.Sections)
	if len(addrs) == 0 {
		return bad("-%s: must name running %s brokers (embedded ones live inside mqtarget serve)", b.AddrsSetting(), b.Name)
	}
	log := newLogger(cfg.Log, stderr)
	cons, err := b.OpenConsumer(&cfg.Sections, addrs, publishers.ConsumerOptions{Group: *group}, log)
	if errors.Is(err, publishers.ErrBadGroup) {
		return bad("-group: %v", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget consume: %v\n", err)
		return 1
	}
	defer cons.Close()
	report, err := consume.Run(ctx, cons, consume.Options{Broker: b.Name, Topic: cfg.Topic, Count: *count, Duration: *duration})
	if errors.Is(err, publishers.ErrBadTopic) {
		return bad("-topic: %v", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqtarget consume: %v\n", err)
		return 1
	}
	if err := report.Write(stdout, *format); err != nil {
		fmt.Fprintf(stderr, "mqtarget consume: %v\n", err)
		return 1
	}
	if !report.OK() {
		return 1
	}
	return 0
}

// parseSubcommand parses a subcommand's own flags from args (the rest are settings for config.Load) with
// usage printed before the flag defaults on -h. done says to return code now: 0 after -h, 2 after a bad
// flag (the flag package printed it and the usage).
func parseSubcommand(fs *flag.FlagSet, usage string, args []string, stderr io.Writer) (rest []string, code int, done bool) {
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	own, rest, help := splitFlags(args, fs)
	if help {
		fs.Usage()
		return nil, 0, true
	}
	if err := fs.Parse(own); err != nil {
		return nil, 2, true
	}
	return rest, 0, false
}

// badInput returns the reporter of bad input for a subcommand: the message on stderr, exit status 2.
func badInput(stderr io.Writer, prefix string) func(format string, args ...any) int {
	return func(format string, args ...any) int {
		fmt.Fprintf(stderr, prefix+": "+format+"\n", args...)
		return 2
	}
}

// splitFlags separates the arguments of fs's own flags from the rest, which are settings for
// config.Load, so both parsers see only their own flags. help reports -h or -help.
func splitFlags(args []string, fs *flag.FlagSet) (own, rest []string, help bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, hasValue := strings.CutPrefix(a, "--")
		if !hasValue {
			name, hasValue = strings.CutPrefix(a, "-")
		}
		if !hasValue || name == "" || a == "--" {
			rest = append(rest, a)
			continue
		}
		name, _, inline := strings.Cut(name, "=")
		if name == "h" || name == "help" {
			help = true
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			rest = append(rest, a)
			continue
		}
		own = append(own, a)
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue // a bool flag takes its value inline (-echo=false) or none
		}
		if !inline && i+1 < len(args) { // every other own flag takes a value
			i++
			own = append(own, args[i])
		}
	}
	return own, rest, help
}
