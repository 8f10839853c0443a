// Command stompanchor is the STOMP anchor of docs/benchmarks.md: what a plain Go client gets from a
// broker without mqtarget in between. Each of -c senders dials its own connection with go-stomp
// (stomp.Dial) and sends 100-byte messages with a receipt (stomp.SendOpt.Receipt), one after the other,
// as a user would write it. go-stomp holds a connection while it waits for a receipt, so one connection
// per sender is what gives concurrency.
//
// It runs -warmup, then measures for -d and prints closedloop's result line ("rate=… p50_ms=… p99_ms=…
// p999_ms=… max_ms=… failed=… sent=…").
// With -drain it instead consumes the destination until it stays empty for 3 seconds (at most -d) and
// prints how many messages it read: the benchmark empties the queue between runs, so that no run pays
// for the broker paging what the runs before it left.
//
//	go run ./cmd/bench-stompanchor -addr 127.0.0.1:61613 -login artemis -passcode artemis -c 16
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-stomp/stomp/v3"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
)

type options struct {
	closedloop.Common
	addr, login, passcode, dest string
	drain                       bool
}

func main() {
	var o options
	o.Register(flag.CommandLine)
	flag.StringVar(&o.addr, "addr", "127.0.0.1:61613", "STOMP broker host:port")
	flag.StringVar(&o.login, "login", "", "CONNECT login")
	flag.StringVar(&o.passcode, "passcode", "", "CONNECT passcode")
	flag.StringVar(&o.dest, "dest", "/queue/mqtarget-anchor", "destination")
	flag.BoolVar(&o.drain, "drain", false, "consume the destination until empty instead (at most -d)")
	flag.Parse()
	if o.drain {
		if err := o.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "stompanchor:", err)
			os.Exit(2)
		}
		n, err := drain(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stompanchor:", err)
			os.Exit(1)
		}
		fmt.Println(n)
		return
	}
	os.Exit(closedloop.Main("stompanchor", o.Common, o.open, os.Stdout, os.Stderr))
}

// open dials one connection per sender; each sends with a receipt and waits for it.
func (o options) open(c closedloop.Common) (closedloop.Session, error) {
	conns := make([]*stomp.Conn, c.Senders)
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Disconnect()
			}
		}
	}
	for i := range conns {
		c, err := stomp.Dial("tcp", o.addr, stomp.ConnOpt.Login(o.login, o.passcode))
		if err != nil {
			closeAll()
			return closedloop.Session{}, fmt.Errorf("connection %d: %w", i, err)
		}
		conns[i] = c
	}
	body := c.Body()
	return closedloop.Session{
		Send:  func(i int) error { return conns[i].Send(o.dest, "", body, stomp.SendOpt.Receipt) },
		Close: closeAll,
	}, nil
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
	end := time.After(o.Duration)
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
			return n, fmt.Errorf("still draining after %v (%d messages read)", o.Duration, n)
		}
	}
}
