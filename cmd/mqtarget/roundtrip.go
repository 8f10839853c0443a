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
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/internal/serve"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

const roundtripUsage = `usage: mqtarget roundtrip [-broker B] [-count N] [-size BYTES] [-producers P] [-handoff queue|direct] [-workers W] [-echo=false] [-probe_wait D] [-o table|json|csv] [settings]

Publishes a batch of N messages to echo.topics[0] of broker B as fast as P producers can; an echo in this
process (or, with -echo=false, another mqtarget with echo.enabled) returns each to its ack topic, and
the acks are matched by id. Prints one row: send_ms, echo_receive_ms, echo_last_latency_ms,
echo_max_latency_ms, return_receive_ms, return_last_latency_ms, rtt_p50_ms, rtt_p99_ms, rtt_max_ms,
lost, duplicates (times in milliseconds; *_last_latency_ms is the last message's to arrive, the longest
is echo_max_latency_ms and rtt_max_ms). Exit status: 0 when lost = duplicates = 0, 1 otherwise, 2 for bad input. When stderr
is a terminal, a batch running over a second shows its progress there, erased before the row.

Before the first measured message, a probe goes to every host until it came back through the echo
(within -probe_wait, else exit 1 naming the host): consumers subscribe in the background, and a broker
that keeps nothing for a topic without a subscriber (topics with no retention) would drop what
came first. Probes are counted nowhere.

The broker's addresses come from the same settings, environment and config file as the service; with
none, embedded servers are started (for the brokers that have them).

`

// Bounds of the roundtrip flags.
const (
	maxRoundTripCount     = 1_000_000
	maxRoundTripProducers = 1024
	maxRoundTripWorkers   = 4096
	maxRoundTripWait      = time.Hour
	maxRoundTripBytes     = 4 << 30 // -count × -size: what one batch publishes
)

// runRoundTrip is `mqtarget roundtrip`: a thin adapter over roundtrip.Batch.
func runRoundTrip(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqtarget roundtrip", flag.ContinueOnError)
	fs.SetOutput(stderr)
	count := fs.Int("count", 1000, fmt.Sprintf("messages in the batch (1..%d)", maxRoundTripCount))
	size := fs.Int("size", 1024, fmt.Sprintf("payload bytes (%d..message.max_size)", message.HeaderLen))
	producers := fs.Int("producers", 4, fmt.Sprintf("publishing goroutines (1..%d)", maxRoundTripProducers))
	handoff := fs.String("handoff", "queue", "the echo's handoff: queue or direct")
	workers := fs.Int("workers", 4, fmt.Sprintf("the echo's workers (1..%d)", maxRoundTripWorkers))
	echo := fs.Bool("echo", true, "run the echo in this process (-echo=false: another mqtarget echoes)")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for acks after the last publish; later ones are lost")
	probeWait := fs.Duration("probe_wait", roundtrip.DefaultProbeWait, "how long to wait, before the batch, for a probe back through the echo from every host")
	format := fs.String("o", "table", "output format: "+strings.Join(roundtrip.Formats, ", "))
	rest, code, done := parseSubcommand(fs, roundtripUsage, args, stderr)
	if done {
		return code
	}
	bad := badInput(stderr, "mqtarget roundtrip")
	cfg, _, err := config.Load(config.Sources{Args: rest, LookupEnv: os.LookupEnv, ReadFile: os.ReadFile, Output: stderr})
	if err != nil {
		return bad("%v", err)
	}
	_, herr := roundtrip.ParseHandoff(*handoff)
	switch {
	case *count < 1 || *count > maxRoundTripCount:
		return bad("-count: must be 1..%d, got %d", maxRoundTripCount, *count)
	case *size < message.HeaderLen || *size > cfg.Message.MaxSize:
		return bad("-size: must be %d..%d (message.max_size), got %d", message.HeaderLen, cfg.Message.MaxSize, *size)
	case *producers < 1 || *producers > maxRoundTripProducers:
		return bad("-producers: must be 1..%d, got %d", maxRoundTripProducers, *producers)
	case herr != nil:
		return bad("-handoff: %v", herr)
	case *workers < 1 || *workers > maxRoundTripWorkers:
		return bad("-workers: must be 1..%d, got %d", maxRoundTripWorkers, *workers)
	case *wait <= 0 || *wait > maxRoundTripWait:
		return bad("-wait: must be > 0 and <= %v, got %v", maxRoundTripWait, *wait)
	case *probeWait <= 0 || *probeWait > maxRoundTripWait:
		return bad("-probe_wait: must be > 0 and <= %v, got %v", maxRoundTripWait, *probeWait)
	case int64(*count)*int64(*size) > maxRoundTripBytes:
		return bad("-count × -size: at most %d bytes per batch, got %d × %d", maxRoundTripBytes, *count, *size)
	case !slices.Contains(roundtrip.Formats, *format):
		return bad("-o: unknown output format %q, want %s", *format, strings.Join(roundtrip.Formats, ", "))
	case len(cfg.Echo.Topics) == 0:
		return bad("-echo.topics: the batch goes to its first topic; it is empty")
	}
	log := newLogger(cfg.Log, stderr)
	fail := func(err error) int {
		fmt.Fprintf(stderr, "mqtarget roundtrip: %v\n", err)
		return 1
	}
	b := brokers.Lookup(cfg.Broker) // config.Load validated the name
	addrs := b.Addrs(&cfg.Sections)
	if len(addrs) == 0 {
		var stop func()
		if addrs, stop, err = serve.StartEmbedded(b, cfg, 1, log); err != nil {
			return fail(err)
		}
		defer stop()
	}
	o := roundtrip.RunOptions{Count: *count, Size: *size, Producers: *producers, Handoff: roundtrip.Handoff(*handoff),
		Workers: *workers, Echo: *echo, Wait: *wait, ProbeWait: *probeWait}
	var line *progressLine
	if isTerminal(stderr) {
		line = newProgressLine(stderr, b.Name)
		o.Progress = line.update
	}
	r, err := roundtrip.Run(ctx, cfg, addrs, o, log)
	line.clear()
	if errors.Is(err, publishers.ErrBadTopic) {
		return bad("-%v", err) // the error names the setting: echo.topics[0] or echo.ack_suffix
	}
	if err != nil {
		return fail(err)
	}
	if err := r.Write(stdout, *format); err != nil {
		return fail(err)
	}
	if !r.OK() {
		return 1
	}
	return 0
}
