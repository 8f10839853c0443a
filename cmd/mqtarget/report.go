package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

const reportUsage = `usage: mqtarget report [-o table|json|csv] [-max-error-rate F] RESULT.json...

Merges the JSON results of mqtarget load (-o json) sent by several processes or machines — the shards
of one load (-shard I/N), or runs of the same model against the same URL — into one result, printed as
mqtarget load prints one: requests, answers by status, errors and not_sent are the sums; latency
percentiles come from the merged histograms (each result carries its own), so they are what one
generator measuring every request would have printed, within the histogram's precision (exact to the
microsecond below 2 ms, within 0.05 % above). Shards must all be there, each once. Exit status as
mqtarget load's: 1 when the merged run failed (-max-error-rate), 2 for bad input (naming the file).

`

// maxResultBytes bounds one result file: a result is a few kilobytes, its histograms at most about
// 32 000 buckets each.
const maxResultBytes = 16 << 20

// runReport is `mqtarget report`.
func runReport(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mqtarget report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("o", "table", "output format: "+strings.Join(load.Formats, ", "))
	maxErrorRate := fs.Float64("max-error-rate", load.DefaultMaxErrorRate, "share of requests (0..1) answered non-2xx or not at all above which the merged run failed (exit 1)")
	fs.Usage = func() {
		fmt.Fprint(stderr, reportUsage)
		fs.PrintDefaults()
	}
	files, code, done := parseInterleaved(fs, args)
	if done {
		return code
	}
	bad := badInput(stderr, "mqtarget report")
	switch {
	case len(files) == 0:
		return bad("no result file given")
	case len(files) > load.MaxShards:
		return bad("%d files, at most %d", len(files), load.MaxShards)
	case !slices.Contains(load.Formats, *format):
		return bad("-o: unknown output format %q, want %s", *format, strings.Join(load.Formats, ", "))
	case !(*maxErrorRate >= 0 && *maxErrorRate <= 1):
		return bad("-max-error-rate: must be 0..1, got %v", *maxErrorRate)
	}
	rs := make([]*load.Result, len(files))
	for i, name := range files {
		b, err := readLimited(name, maxResultBytes)
		if err != nil {
			return bad("%v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		rs[i] = &load.Result{}
		if err := dec.Decode(rs[i]); err != nil {
			return bad("%s: not a result of mqtarget load -o json: %v", name, err)
		}
	}
	m, err := load.Merge(rs, files)
	if err != nil {
		return bad("%v", err)
	}
	if err := m.Write(stdout, *format); err != nil {
		fmt.Fprintf(stderr, "mqtarget report: %v\n", err)
		return 1
	}
	if err := m.Check(*maxErrorRate); err != nil {
		fmt.Fprintf(stderr, "mqtarget report: failed: %v\n", err)
		return 1
	}
	return 0
}
