package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
)

// returnsWithin runs f and fails t when it has not returned within d: the bugs these tests guard
// against are calls that never return, which would otherwise hang the whole test binary. A call that
// does hang is leaked with the failed test.
func returnsWithin(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		t.Fatalf("%s: not returned within %v", what, d)
		return nil
	}
}

// TestShutdownRepeated: App.Shutdown (and the admin and pprof servers' shutdown under it) may be called
// again after it returned, and by several goroutines at once (Run's own call and a caller's, a test's
// cleanup): every call returns, with the first call's result.
func TestShutdownRepeated(t *testing.T) {
	// sides serve the admin routes and pprof on listeners of their own, so their shutdown is part of it.
	sides := func(c *config.Config) {
		c.ShutdownLameDuck = 0
		c.HTTP.AdminAddr = "127.0.0.1:0"
		c.PProf.Addr = "127.0.0.1:0"
	}
	targets := []struct {
		name  string
		start func(t *testing.T) func(context.Context) error
	}{
		{"app", func(t *testing.T) func(context.Context) error {
			return startApp(t, sides).Shutdown
		}},
		// Echoes and round-trip consumers on embedded brokers: closeBrokers has stoppers to run.
		{"app with echoes", func(t *testing.T) func(context.Context) error {
			a, err := Start(embeddedConfig(sides), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if len(a.stoppers) == 0 {
				_ = a.Shutdown(context.Background())
				t.Fatal("no echoes or round-trip consumers started")
			}
			return a.Shutdown
		}},
		{"side server", func(t *testing.T) func(context.Context) error {
			p, err := listenSide("test.addr", "127.0.0.1:0", http.NotFoundHandler(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			p.serve()
			return p.shutdown
		}},
	}
	for _, target := range targets {
		for _, tc := range []struct {
			name       string
			concurrent bool
		}{
			{"again after it returned", false},
			{"four at once", true},
		} {
			t.Run(target.name+"/"+tc.name, func(t *testing.T) {
				shutdown := target.start(t)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if !tc.concurrent {
					for i := 1; i <= 3; i++ {
						if err := returnsWithin(t, 15*time.Second, fmt.Sprintf("call %d", i), func() error { return shutdown(ctx) }); err != nil {
							t.Errorf("call %d: %v", i, err)
						}
					}
					return
				}
				const calls = 4
				errs := make(chan error, calls)
				var wg sync.WaitGroup
				for range calls {
					wg.Go(func() { errs <- shutdown(ctx) })
				}
				_ = returnsWithin(t, 15*time.Second, "every call", func() error { wg.Wait(); return nil })
				close(errs)
				for err := range errs {
					if err != nil {
						t.Errorf("a call: %v", err)
					}
				}
			})
		}
	}
}

// TestShutdownLaterCallOwnContext: a call made while a shutdown is under way waits for it only as long
// as its own ctx allows, and does not cut the shutdown short; once the shutdown is over, a call returns
// its result at once.
func TestShutdownLaterCallOwnContext(t *testing.T) {
	a := startApp(t, func(c *config.Config) { c.ShutdownLameDuck = 0 })
	// A connection that has sent nothing holds the first shutdown (the drain, then http.Server.Shutdown
	// wait for it) until it closes.
	c, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "the connection to be accepted", func() bool { return a.limit.unread() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- a.Shutdown(ctx) }()
	waitFor(t, "the first Shutdown to begin", a.shutdownBegun.Load)

	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	err = returnsWithin(t, 5*time.Second, "the call with a 50 ms ctx", func() error { return a.Shutdown(short) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the call with a 50 ms ctx: %v, want %v", err, context.DeadlineExceeded)
	}
	select {
	case err := <-first:
		t.Fatalf("the first Shutdown returned (%v) while the connection it waits for is open", err)
	default:
	}
	// The connection was not cut by the later call's ctx: the server still has it.
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the held connection: %v, want it open (a read timeout)", err)
	}

	_ = c.Close()
	if err := returnsWithin(t, 15*time.Second, "the first Shutdown", func() error { return <-first }); err != nil {
		t.Errorf("the first Shutdown: %v", err)
	}
	if err := a.Shutdown(short); err != nil { // short has ended: the result is there already
		t.Errorf("a call after the shutdown, its ctx ended: %v, want the first's result (nil)", err)
	}
}
