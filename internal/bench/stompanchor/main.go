// Command stompanchor is the STOMP anchor of docs/benchmarks.md: what a plain Go client gets from a
// broker without mqtarget in between. Each of -c senders dials its own connection with go-stomp
// (stomp.Dial) and sends 100-byte messages with a receipt (stomp.SendOpt.Receipt), one after the other,
// as a user would write it. go-stomp holds a connection while it waits for a receipt, so one connection
// per sender is what gives concurrency.
//
// It runs -warmup, then measures for -d and prints one line: "RPS P50_MS P99_MS ERRORS SENT".
//
//	go run ./internal/bench/stompanchor -addr 127.0.0.1:61613 -login artemis -passcode artemis -c 16
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-stomp/stomp/v3"
)

type options struct {
	addr, login, passcode, dest string
	senders, size               int
	duration, warmup            time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:61613", "STOMP broker host:port")
	flag.StringVar(&o.login, "login", "", "CONNECT login")
	flag.StringVar(&o.passcode, "passcode", "", "CONNECT passcode")
	flag.StringVar(&o.dest, "dest", "/queue/mqtarget-anchor", "destination")
	flag.IntVar(&o.senders, "c", 1, "concurrent senders, one connection each")
	flag.IntVar(&o.size, "size", 100, "message size in bytes")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "measured duration")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured warm-up before it")
	flag.Parse()
	if o.senders < 1 || o.size < 0 || o.duration <= 0 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "stompanchor: -c must be at least 1, -d positive, -size and -warmup not negative")
		os.Exit(2)
	}
	r, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stompanchor:", err)
		os.Exit(1)
	}
	fmt.Println(r)
}

type result struct {
	rps, p50, p99 float64
	errors, sent  int64
}

func (r result) String() string {
	return fmt.Sprintf("%.0f %.3f %.3f %d %d", r.rps, r.p50, r.p99, r.errors, r.sent)
}

func run(o options) (result, error) {
	conns := make([]*stomp.Conn, o.senders)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Disconnect()
			}
		}
	}()
	for i := range conns {
		c, err := stomp.Dial("tcp", o.addr, stomp.ConnOpt.Login(o.login, o.passcode))
		if err != nil {
			return result{}, fmt.Errorf("connection %d: %w", i, err)
		}
		conns[i] = c
	}
	body := make([]byte, o.size)
	for i := range body {
		body[i] = 'x'
	}
	start := time.Now()
	measureFrom, measureTo := start.Add(o.warmup), start.Add(o.warmup+o.duration)
	ctx, cancel := context.WithDeadline(context.Background(), measureTo)
	defer cancel()
	var (
		errs    atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
		firstEr error
		wg      sync.WaitGroup
	)
	for _, c := range conns {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				err := c.Send(o.dest, "", body, stomp.SendOpt.Receipt)
				t1 := time.Now()
				if t0.Before(measureFrom) || t1.After(measureTo) {
					continue
				}
				if err != nil {
					errs.Add(1)
					mu.Lock()
					if firstEr == nil {
						firstEr = err
					}
					mu.Unlock()
					if errors.Is(err, stomp.ErrAlreadyClosed) {
						return
					}
					continue
				}
				mine = append(mine, t1.Sub(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstEr != nil {
		fmt.Fprintf(os.Stderr, "stompanchor: %d sends failed, the first: %v\n", errs.Load(), firstEr)
	}
	if len(lat) == 0 {
		return result{errors: errs.Load()}, errors.New("no send completed in the measured window")
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	return result{
		rps:    float64(len(lat)) / o.duration.Seconds(),
		p50:    pct(0.50),
		p99:    pct(0.99),
		errors: errs.Load(),
		sent:   int64(len(lat)),
	}, nil
}
