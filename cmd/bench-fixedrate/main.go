// Command fixedrate is the load and the sampler of scripts/soak.sh: it sends requests to mqtarget at a
// fixed rate (open loop: the next request is due at its time whether or not earlier ones were answered,
// unlike wrk's connections, which wait), round-robin over a list of endpoints, with at most
// -max-outstanding requests unanswered; a request due while that many are outstanding is not sent and
// counted as skipped, so a target that cannot keep up shows as skipped sends, not as a lower rate.
// Every -interval it samples the target process's RSS (VmRSS), goroutines (go_goroutines from
// /metrics) and open file descriptors (/proc/PID/fd), prints a markdown table row, and at the end judges
// whether each stayed flat after -warmup (see Judge).
//
// It exits 1 when any answer was not 2xx, a request failed or was skipped, or a series was not flat.
//
//	go run ./cmd/bench-fixedrate -addr 127.0.0.1:8080 -pid 1234 -rate 1000 -duration 10m
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	addr, admin, endpoints string
	pid, rate, outstanding int
	duration, warmup       time.Duration
	interval, timeout      time.Duration
	rss, gor, fds          Limit
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "mqtarget's HTTP host:port")
	flag.StringVar(&o.admin, "admin", "", "host:port serving /metrics (empty: -addr)")
	flag.StringVar(&o.endpoints, "endpoints", "/send1,/send2,/sendAsync,/sendAsyncWait,/send3Host", "paths, comma-separated, sent round-robin")
	flag.IntVar(&o.pid, "pid", 0, "mqtarget's process id (sampled in /proc)")
	flag.IntVar(&o.rate, "rate", 1000, "requests per second")
	flag.IntVar(&o.outstanding, "max-outstanding", 512, "unanswered requests at most; a request due beyond it is skipped")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to send")
	flag.DurationVar(&o.warmup, "warmup", time.Minute, "samples before this are shown but not judged")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "time between samples")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "client timeout per request")
	flag.Float64Var(&o.rss.Pct, "rss-pct", 20, "RSS: allowed growth, percent of the first-third median")
	flag.Float64Var(&o.rss.Abs, "rss-abs", 16, "RSS: allowed growth besides -rss-pct, MiB")
	flag.Float64Var(&o.gor.Pct, "goroutines-pct", 10, "goroutines: allowed growth, percent")
	flag.Float64Var(&o.gor.Abs, "goroutines-abs", 20, "goroutines: allowed growth besides the percentage")
	flag.Float64Var(&o.fds.Pct, "fds-pct", 10, "open fds: allowed growth, percent")
	flag.Float64Var(&o.fds.Abs, "fds-abs", 10, "open fds: allowed growth besides the percentage")
	flag.Parse()
	if o.pid <= 0 || o.rate <= 0 || o.outstanding <= 0 || o.duration <= 0 || o.interval <= 0 {
		fmt.Fprintln(os.Stderr, "fixedrate: -pid, -rate, -max-outstanding, -duration and -interval must be > 0")
		os.Exit(2)
	}
	if o.admin == "" {
		o.admin = o.addr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixedrate:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// counts are the answers so far, per endpoint and status (0: no answer: a transport error or timeout).
type counts struct {
	mu       sync.Mutex
	status   map[string]map[int]int
	firstErr error
	sent     atomic.Int64
	skipped  atomic.Int64
	cut      atomic.Int64 // unanswered when the run ended; neither judged nor counted as failed
	non2xx   atomic.Int64 // includes transport errors
}

func (c *counts) add(path string, status int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status[path] == nil {
		c.status[path] = map[int]int{}
	}
	c.status[path][status]++
	if err != nil && c.firstErr == nil {
		c.firstErr = err
	}
	if status < 200 || status > 299 {
		c.non2xx.Add(1)
	}
}

// load sends o.rate requests per second until ctx ends, and waits for the ones it sent.
func load(ctx context.Context, o options, paths []string, c *counts) {
	tr := &http.Transport{MaxIdleConnsPerHost: o.outstanding, MaxConnsPerHost: o.outstanding}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: o.timeout}
	sem := make(chan struct{}, o.outstanding)
	var wg sync.WaitGroup
	defer wg.Wait()
	start := time.Now()
	period := time.Second / time.Duration(o.rate)
	for n := 0; ; {
		// Send every request due by now; the sleep below only paces, it does not synchronise.
		for due := time.Since(start) / period; int64(n) <= int64(due); n++ {
			path := paths[n%len(paths)]
			select {
			case sem <- struct{}{}:
			default:
				c.skipped.Add(1)
				continue
			}
			c.sent.Add(1)
			wg.Go(func() {
				defer func() { <-sem }()
				status, err := get(ctx, client, "http://"+o.addr+path)
				if ctx.Err() != nil && err != nil {
					c.cut.Add(1) // cut by the end of the run, not by the target
					return
				}
				c.add(path, status, err)
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(time.Duration(n) * period))):
		}
	}
}

func get(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // read to the end so the connection is reused
	return resp.StatusCode, nil
}

type sample struct {
	at             time.Duration
	rss, gor, fds  float64
	sent, bad, skp int64
}

func (o options) take(ctx context.Context, at time.Duration, c *counts) (sample, error) {
	s := sample{at: at, sent: c.sent.Load(), bad: c.non2xx.Load(), skp: c.skipped.Load()}
	var err error
	if s.rss, err = rssMiB(o.pid); err != nil {
		return s, err
	}
	if s.gor, err = goroutines(ctx, "http://"+o.admin+"/metrics"); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", o.pid))
	if err != nil {
		return s, err
	}
	s.fds = float64(len(fds))
	return s, nil
}

func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

func goroutines(ctx context.Context, url string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no go_goroutines", url)
}

// run sends and samples for o.duration and prints the table, the answers and the verdicts to w.
func run(ctx context.Context, o options, w io.Writer) (bool, error) {
	paths := strings.Split(o.endpoints, ",")
	c := &counts{status: map[string]map[int]int{}}
	start := time.Now()
	first, err := o.take(ctx, 0, c) // before any load: fails fast on a wrong -pid or -admin
	if err != nil {
		return false, err
	}
	fmt.Fprintf(w, "fixed rate %d req/s over %s for %s, at most %d outstanding; sample every %s, warm-up %s\n\n",
		o.rate, strings.Join(paths, " "), o.duration, o.outstanding, o.interval, o.warmup)
	fmt.Fprintln(w, "| t (s) | RSS MiB | goroutines | open fds | sent | non-2xx | skipped |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	row := func(s sample) {
		fmt.Fprintf(w, "| %.0f | %.1f | %.0f | %.0f | %d | %d | %d |\n", s.at.Seconds(), s.rss, s.gor, s.fds, s.sent, s.bad, s.skp)
	}
	row(first)

	lctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { load(lctx, o, paths, c) })
	var samples []sample
	tick := time.NewTicker(o.interval)
	for done := false; !done; {
		select {
		case <-lctx.Done():
			done = true
		case <-tick.C:
			s, err := o.take(ctx, time.Since(start), c)
			if err != nil {
				cancel()
				wg.Wait()
				return false, fmt.Errorf("sample at %s: %w", time.Since(start).Round(time.Second), err)
			}
			row(s)
			samples = append(samples, s)
		}
	}
	tick.Stop()
	wg.Wait()
	if ctx.Err() != nil {
		return false, errors.New("interrupted")
	}
	return report(w, o, c, samples), nil
}

// report prints the answers per endpoint and the verdicts, and says whether the run passed.
func report(w io.Writer, o options, c *counts, samples []sample) bool {
	ok := true
	fmt.Fprintf(w, "\nanswers (status: count; 0 = no answer):\n")
	for _, p := range slices.Sorted(maps.Keys(c.status)) {
		var parts []string
		for _, st := range slices.Sorted(maps.Keys(c.status[p])) {
			parts = append(parts, fmt.Sprintf("%d: %d", st, c.status[p][st]))
		}
		fmt.Fprintf(w, "- %s %s\n", p, strings.Join(parts, ", "))
	}
	sent, bad, skipped := c.sent.Load(), c.non2xx.Load(), c.skipped.Load()
	fmt.Fprintf(w, "- sent %d (%.1f req/s), non-2xx or failed %d, skipped (max outstanding reached) %d, unanswered at the end %d\n",
		sent, float64(sent)/o.duration.Seconds(), bad, skipped, c.cut.Load())
	if bad > 0 || skipped > 0 {
		ok = false
		if c.firstErr != nil {
			fmt.Fprintf(w, "- first error: %v\n", c.firstErr)
		}
	}
	var judged []sample
	for _, s := range samples {
		if s.at >= o.warmup {
			judged = append(judged, s)
		}
	}
	series := func(f func(sample) float64) []float64 {
		out := make([]float64, len(judged))
		for i, s := range judged {
			out[i] = f(s)
		}
		return out
	}
	fmt.Fprintf(w, "\nverdict (%d samples after the %s warm-up; last-third median ≤ first-third median × (1 + pct) + abs):\n", len(judged), o.warmup)
	for _, m := range []struct {
		name string
		v    Verdict
		l    Limit
	}{
		{"RSS MiB", Judge(series(func(s sample) float64 { return s.rss }), o.rss), o.rss},
		{"goroutines", Judge(series(func(s sample) float64 { return s.gor }), o.gor), o.gor},
		{"open fds", Judge(series(func(s sample) float64 { return s.fds }), o.fds), o.fds},
	} {
		fmt.Fprintf(w, "- %s (+%g%% +%g): %s\n", m.name, m.l.Pct, m.l.Abs, m.v)
		ok = ok && m.v.Flat
	}
	if ok {
		fmt.Fprintln(w, "\nPASS: every answer 2xx, nothing skipped, RSS, goroutines and fds flat")
	} else {
		fmt.Fprintln(w, "\nFAIL")
	}
	return ok
}
