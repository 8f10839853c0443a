package closedloop

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Common are the flags every direct client takes (-c, -size, -d, -warmup, -timeout), with the same
// defaults.
type Common struct {
	Senders          int
	Size             int
	Duration, Warmup time.Duration
	Timeout          time.Duration // per send (and for opening the connections)
	Think            time.Duration // Options.Think
	// HTTP, when set, serves the session over bare HTTP on this loopback address instead of running
	// the closed loop (Serve: the anchors' floor row), until SIGTERM or SIGINT.
	HTTP string
}

// MaxSize bounds -size: the anchors send 100-byte messages; a few MiB is every broker's limit.
const MaxSize = 16 << 20

// Register adds the common flags to fs.
func (c *Common) Register(fs *flag.FlagSet) {
	fs.IntVar(&c.Senders, "c", 1, "concurrent senders, each waiting for the broker's answer before its next send")
	fs.IntVar(&c.Size, "size", 100, "message size in bytes")
	fs.DurationVar(&c.Duration, "d", 10*time.Second, "measured duration")
	fs.DurationVar(&c.Warmup, "warmup", 3*time.Second, "unmeasured warm-up before it")
	fs.DurationVar(&c.Think, "think", 0, "each sender's pause after an answer before its next send (0: none), as the gap a client behind HTTP leaves")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Second, "per send, for clients that take a deadline (and for dialling): a send not answered by then fails")
	fs.StringVar(&c.HTTP, "http", "", "serve GET /send1 (one send each, -c senders) and /healthz on this loopback host:port with bare chi + net/http, until SIGTERM, instead of the closed loop: the anchors' floor")
}

// Body is the message every send carries: Size bytes of 'x'.
func (c Common) Body() []byte { return bytes.Repeat([]byte{'x'}, c.Size) }

// Timed is a Session.Send that gives each send a context ending after Timeout.
func (c Common) Timed(send func(ctx context.Context, i int) error) func(int) error {
	return func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		defer cancel()
		return send(ctx, i)
	}
}

// Validate names the first bad flag.
func (c Common) Validate() error {
	if c.Size < 0 || c.Size > MaxSize {
		return fmt.Errorf("-size: must be 0..%d, got %d", MaxSize, c.Size)
	}
	if c.Timeout <= 0 || c.Timeout > time.Minute {
		return fmt.Errorf("-timeout: must be > 0 and <= 1m, got %v", c.Timeout)
	}
	return Options{Senders: c.Senders, Duration: c.Duration, Warmup: c.Warmup, Think: c.Think, Send: func(int) error { return nil }}.Validate()
}

// Session is a direct client's open connections: Send sends one message for sender i and returns once
// the broker answered it; Close (may be nil) closes them; Window and Extra (may be nil) are
// Options.Window and a suffix to the result line (" key=value ...").
type Session struct {
	Send   func(i int) error
	Close  func()
	Window func(start bool)
	Extra  func(r Result) string
}

// Main is a direct client's main after its own flags: it checks the common ones (exit 2 naming the
// flag), opens the session (exit 1 when it fails), runs it and prints the result line on stdout (exit
// 1 when no send completed). Errors go to stderr prefixed with name.
func Main(name string, c Common, open func(Common) (Session, error), stdout, stderr io.Writer) int {
	if err := c.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	s, err := open(c)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if s.Close != nil {
		defer s.Close()
	}
	if c.HTTP != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		fmt.Fprintf(stderr, "%s: serving /send1 on http://%s until SIGTERM\n", name, c.HTTP)
		if err := Serve(ctx, c.HTTP, c.Senders, s.Send); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		return 0
	}
	r := Run(Options{Senders: c.Senders, Warmup: c.Warmup, Duration: c.Duration, Think: c.Think, Send: s.Send, Window: s.Window})
	if r.FirstErr != nil {
		fmt.Fprintf(stderr, "%s: %d sends failed, the first: %v\n", name, r.Failed, r.FirstErr)
	}
	if err := r.Check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	line := r.String()
	if s.Extra != nil {
		line += s.Extra(r)
	}
	fmt.Fprintln(stdout, line)
	return 0
}
