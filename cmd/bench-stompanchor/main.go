// Command stompanchor is the STOMP anchor of docs/benchmarks.md: what a plain Go client gets from a
// broker without mqtarget in between. Each of -c senders dials its own connection with go-stomp
// (stomp.Dial) and sends 100-byte messages with a receipt (stomp.SendOpt.Receipt), one after the other,
// as a user would write it. go-stomp holds a connection while it waits for a receipt, so one connection
// per sender is what gives concurrency.
//
// It runs -warmup, then measures for -d and prints one line: "RPS P50_MS P99_MS ERRORS SENT".
// With -drain it instead consumes the destination until it stays empty for 3 seconds (at most -d) and
// prints how many messages it read: the benchmark empties the queue between runs, so that no run pays
// for the broker paging what the runs before it left.
//
//	go run ./cmd/bench-stompanchor -addr 127.0.0.1:61613 -login artemis -passcode artemis -c 16
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-stomp/stomp/v3"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
)

type options struct {
	addr, login, passcode, dest string
	senders, size               int
	duration, warmup            time.Duration
	drain                       bool
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
	flag.BoolVar(&o.drain, "drain", false, "consume the destination until empty instead (at most -d)")
	flag.Parse()
	if o.senders < 1 || o.size < 0 || o.duration <= 0 || o.warmup < 0 {
		fmt.Fprintln(os.Stderr, "stompanchor: -c must be at least 1, -d positive, -size and -warmup not negative")
		os.Exit(2)
	}
	if o.drain {
		n, err := drain(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stompanchor:", err)
			os.Exit(1)
		}
		fmt.Println(n)
		return
	}
	r, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stompanchor:", err)
		os.Exit(1)
	}
	fmt.Println(r)
}

func run(o options) (closedloop.Result, error) {
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
			return closedloop.Result{}, fmt.Errorf("connection %d: %w", i, err)
		}
		conns[i] = c
	}
	body := bytes.Repeat([]byte{'x'}, o.size)
	r := closedloop.Run(closedloop.Options{
		Senders: o.senders, Warmup: o.warmup, Duration: o.duration,
		Send: func(i int) error { return conns[i].Send(o.dest, "", body, stomp.SendOpt.Receipt) },
	})
	if r.FirstErr != nil {
		fmt.Fprintf(os.Stderr, "stompanchor: %d sends failed, the first: %v\n", r.Failed, r.FirstErr)
	}
	if r.Sent == 0 {
		return r, errors.New("no send completed in the measured window")
	}
	return r, nil
}

// drainIdle: how long the destination must stay quiet to count as empty; Artemis on busy cores can pause
// deliveries for over a second.
const drainIdle = 3 * time.Second

// drain consumes o.dest until no message arrives for drainIdle, or o.duration passed.
func drain(o options) (int, error) {
	c, err := stomp.Dial("tcp", o.addr, stomp.ConnOpt.Login(o.login, o.passcode))
	if err != nil {
		return 0, err
	}
	// no UNSUBSCRIBE or DISCONNECT receipt: go-stomp's read loop may be blocked delivering a message
	// nobody reads any more, and would never see the receipt
	defer func() { _ = c.MustDisconnect() }()
	sub, err := c.Subscribe(o.dest, stomp.AckAuto)
	if err != nil {
		return 0, err
	}
	end := time.After(o.duration)
	idle := time.NewTimer(drainIdle)
	defer idle.Stop()
	n := 0
	for {
		select {
		case m, ok := <-sub.C:
			if !ok {
				return n, errors.New("subscription closed")
			}
			if m.Err != nil {
				return n, m.Err
			}
			n++
			idle.Reset(drainIdle)
		case <-idle.C:
			return n, nil
		case <-end:
			return n, fmt.Errorf("still draining after %v (%d messages read)", o.duration, n)
		}
	}
}
