package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
)

var (
	errUnavailable = errors.New("unavailable")
	errClosed      = errors.New("closed")
	errRejected    = errors.New("rejected")
)

// A line protocol for the tests: the client writes "C <id>\n" (or what enc says); the broker answers
// "A <id> ok|err\n"; "H\n" is a heart-beat from the broker that wants "P\n" back; "X <id>\n" rejects
// <id> and ends the connection.
func readLine(kind AnswerKind) func(r *bufio.Reader) (Answer, error) {
	return func(r *bufio.Reader) (Answer, error) {
		line, err := r.ReadString('\n')
		if err != nil {
			return Answer{}, err
		}
		f := strings.Fields(line)
		if f[0] == "H" {
			return Answer{Reply: []byte("P\n")}, nil
		}
		id, _ := strconv.ParseUint(f[1], 10, 64)
		switch {
		case f[0] == "X":
			return Answer{Kind: ByID, ID: id, Err: errRejected, Close: fmt.Errorf("%w: after X", errUnavailable)}, nil
		case f[2] == "err":
			return Answer{Kind: kind, ID: id, Err: errRejected}, nil
		default:
			return Answer{Kind: kind, ID: id}, nil
		}
	}
}

func encLine(b []byte, id uint64) []byte {
	b = append(b, "C "...)
	b = strconv.AppendUint(b, id, 10)
	return append(b, '\n')
}

// broker is a scripted server for one connection: serve gets every line the client wrote.
type broker struct {
	t     *testing.T
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startBroker(t *testing.T, serve func(w io.Writer, line string, conn net.Conn)) (*broker, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &broker{t: t, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			b.mu.Lock()
			b.lines = append(b.lines, strings.TrimSpace(line))
			b.mu.Unlock()
			serve(c, strings.TrimSpace(line), c)
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ln.Close()
		nc.Close()
		<-b.done
	})
	return b, nc
}

// waitReceived polls, with a deadline, until the broker has received a line.
func (b *broker) waitReceived() {
	deadline := time.Now().Add(5 * time.Second)
	for len(b.received()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

func (b *broker) received() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

// okAll answers every command in order; ids ending in 7 are rejected.
func okAll(w io.Writer, line string, _ net.Conn) {
	if id, ok := strings.CutPrefix(line, "C "); ok {
		verdict := "ok"
		if strings.HasSuffix(id, "7") {
			verdict = "err"
		}
		fmt.Fprintf(w, "A %s %s\n", id, verdict)
	}
}

func testConfig(kind AnswerKind) Config {
	return Config{
		Name:        "test",
		Read:        readLine(kind),
		MaxWait:     5 * time.Second,
		StallGrace:  time.Second,
		Unavailable: errUnavailable,
		Closed:      errClosed,
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// result collects a callback's outcome and checks it runs exactly once.
type result struct {
	calls atomic.Int32
	ch    chan error
}

func newResult() *result { return &result{ch: make(chan error, 2)} }

func (r *result) done(err error) {
	r.calls.Add(1)
	r.ch <- err
}

// calledOnce checks that each of rs's callbacks ran exactly once.
func calledOnce(t *testing.T, rs []*result) {
	t.Helper()
	for i, r := range rs {
		if n := r.calls.Load(); n != 1 {
			t.Errorf("command %d: done called %d times", i, n)
		}
	}
}

func (r *result) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("callback not called within 10s")
		return nil
	}
}

func TestAnswersMatched(t *testing.T) {
	cases := []struct {
		name  string
		kind  AnswerKind
		serve func(w io.Writer, line string, conn net.Conn)
	}{
		{"in order", Next, okAll},
		{"by id, answered in reverse per pair", ByID, func() func(io.Writer, string, net.Conn) {
			var held string
			return func(w io.Writer, line string, c net.Conn) {
				if held == "" {
					held = line
					return
				}
				okAll(w, line, c)
				okAll(w, held, c)
				held = ""
			}
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, nc := startBroker(t, tc.serve)
			c := New(nc, testConfig(tc.kind))
			defer c.Close()
			const n = 200 // even, so the reverse-pair broker answers all
			results := make([]*result, n)
			var wg sync.WaitGroup
			var mu sync.Mutex
			ids := map[int]uint64{}
			for i := range n {
				results[i] = newResult()
				wg.Go(func() {
					err := c.Send(time.Time{}, func(b []byte, id uint64) []byte {
						mu.Lock()
						ids[i] = id
						mu.Unlock()
						return encLine(b, id)
					}, results[i].done)
					if err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for i, r := range results {
				err := r.wait(t)
				wantErr := strings.HasSuffix(strconv.FormatUint(ids[i], 10), "7")
				if (err != nil) != wantErr || (err != nil && !errors.Is(err, errRejected)) {
					t.Errorf("command %d (id %d): %v, want rejected=%v", i, ids[i], err, wantErr)
				}
			}
			c.Close()
			calledOnce(t, results)
		})
	}
}

// Commands queued while a write is under way leave together in the next write.
func TestWriterGathers(t *testing.T) {
	_, nc := startBroker(t, okAll)
	c := New(nc, testConfig(Next))
	defer c.Close()
	c.wsem <- struct{}{} // hold the writer at its next write
	results := make([]*result, 100)
	for i := range results {
		results[i] = newResult()
		if err := c.Send(time.Time{}, encLine, results[i].done); err != nil {
			t.Fatal(err)
		}
	}
	<-c.wsem
	for _, r := range results {
		if err := r.wait(t); err != nil && !errors.Is(err, errRejected) {
			t.Fatal(err)
		}
	}
	if writes, commands := c.Stats(); commands != 100 || writes > 2 {
		t.Errorf("%d commands in %d writes, want 100 in at most 2", commands, writes)
	}
}

func TestConnectionFailure(t *testing.T) {
	t.Run("broker closes: every pending command fails once, later sends are refused", func(t *testing.T) {
		var seen atomic.Int32
		_, nc := startBroker(t, func(_ io.Writer, _ string, conn net.Conn) {
			if seen.Add(1) == 3 {
				conn.Close()
			}
		})
		c := New(nc, testConfig(Next))
		defer c.Close()
		results := make([]*result, 3)
		for i := range results {
			results[i] = newResult()
			if err := c.Send(time.Time{}, encLine, results[i].done); err != nil {
				t.Fatal(err)
			}
		}
		for i, r := range results {
			if err := r.wait(t); !errors.Is(err, errUnavailable) {
				t.Errorf("command %d: %v, want unavailable", i, err)
			}
		}
		if !c.Dead() {
			t.Error("connection not dead")
		}
		if err := c.Send(time.Time{}, encLine, func(error) { t.Error("done called after a refused Send") }); !errors.Is(err, errUnavailable) {
			t.Errorf("send on a dead connection: %v, want unavailable", err)
		}
		c.Close()
		calledOnce(t, results)
	})
	t.Run("broker answers with an error and closes: that command rejected, the others unavailable", func(t *testing.T) {
		_, nc := startBroker(t, func(w io.Writer, line string, conn net.Conn) {
			if line == "C 2" {
				fmt.Fprint(w, "A 1 ok\nX 2\n")
				conn.Close()
			}
		})
		c := New(nc, testConfig(ByID))
		defer c.Close()
		results := make([]*result, 3)
		c.wsem <- struct{}{} // all three in one write
		for i := range results {
			results[i] = newResult()
			if err := c.Send(time.Time{}, encLine, results[i].done); err != nil {
				t.Fatal(err)
			}
		}
		<-c.wsem
		for i, want := range []error{nil, errRejected, errUnavailable} {
			if err := results[i].wait(t); !errors.Is(err, want) || (want == nil && err != nil) {
				t.Errorf("command %d: %v, want %v", i+1, err, want)
			}
		}
	})
	t.Run("broker stops answering: stalled after the deadline and the grace", func(t *testing.T) {
		_, nc := startBroker(t, func(io.Writer, string, net.Conn) {})
		cfg := testConfig(Next)
		cfg.StallGrace = 100 * time.Millisecond
		c := New(nc, cfg)
		defer c.Close()
		r := newResult()
		start := time.Now()
		if err := c.Send(start.Add(200*time.Millisecond), encLine, r.done); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t); !errors.Is(err, errUnavailable) || !errors.Is(err, ErrStalled) {
			t.Fatalf("got %v, want unavailable (stalled)", err)
		}
		if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
			t.Errorf("stall detected after %v, want about 300ms", d)
		}
	})
}

// Answers the broker cannot have meant fail the connection as a protocol violation, reported to the hook
// once; never is a command acknowledged by them.
func TestProtocolViolations(t *testing.T) {
	cases := []struct {
		name string
		kind AnswerKind
		// serve is the broker; release is closed once the second command has been taken by the writer
		// but not written (with holdSecond).
		serve      func(release <-chan struct{}) func(io.Writer, string, net.Conn)
		holdSecond bool
		wantFirst  bool // the first command is acknowledged (its answer came before the violation)
	}{
		{"by id: answer to an id never sent", ByID, func(<-chan struct{}) func(io.Writer, string, net.Conn) {
			return func(w io.Writer, _ string, _ net.Conn) { fmt.Fprint(w, "A 99 ok\n") }
		}, false, false},
		{"by id: id 0", ByID, func(<-chan struct{}) func(io.Writer, string, net.Conn) {
			return func(w io.Writer, _ string, _ net.Conn) { fmt.Fprint(w, "A 0 ok\n") }
		}, false, false},
		{"by id: answered twice", ByID, func(<-chan struct{}) func(io.Writer, string, net.Conn) {
			return func(w io.Writer, line string, c net.Conn) { okAll(w, line, c); okAll(w, line, c) }
		}, false, true},
		{"in order: answered twice, nothing outstanding", Next, func(<-chan struct{}) func(io.Writer, string, net.Conn) {
			return func(w io.Writer, line string, c net.Conn) { okAll(w, line, c); okAll(w, line, c) }
		}, false, true},
		{"in order: answer ahead of the write", Next, func(release <-chan struct{}) func(io.Writer, string, net.Conn) {
			return func(w io.Writer, _ string, _ net.Conn) {
				<-release
				fmt.Fprint(w, "A 1 ok\nA 2 ok\n")
			}
		}, true, true},
		{"by id: answer ahead of the write", ByID, func(release <-chan struct{}) func(io.Writer, string, net.Conn) {
			return func(w io.Writer, _ string, _ net.Conn) {
				<-release
				fmt.Fprint(w, "A 2 ok\nA 1 ok\n")
			}
		}, true, false},
		{"garbage", Next, func(<-chan struct{}) func(io.Writer, string, net.Conn) {
			return func(w io.Writer, _ string, _ net.Conn) { fmt.Fprint(w, "G\n") }
		}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			b, nc := startBroker(t, tc.serve(release))
			cfg := testConfig(tc.kind)
			read := cfg.Read
			cfg.Read = func(r *bufio.Reader) (Answer, error) {
				if s, _ := r.Peek(1); len(s) == 1 && s[0] == 'G' {
					_, _ = r.ReadString('\n')
					return Answer{}, fmt.Errorf("%w: garbage", ErrProtocol)
				}
				return read(r)
			}
			reported := make(chan error, 4)
			cfg.ProtocolError = func(err error) { reported <- err }
			c := New(nc, cfg)
			defer c.Close()
			first, second := newResult(), newResult()
			if err := c.Send(time.Time{}, encLine, first.done); err != nil {
				t.Fatal(err)
			}
			if tc.holdSecond {
				b.waitReceived()
				c.wsem <- struct{}{} // the writer takes the second command, then waits here
				if err := c.Send(time.Time{}, encLine, second.done); err != nil {
					t.Fatal(err)
				}
				testwait.For(t, 5*time.Second, "the writer to take the second command", func() bool {
					c.mu.Lock()
					defer c.mu.Unlock()
					return c.written == 2
				})
				close(release)
			}
			err := first.wait(t)
			if tc.wantFirst != (err == nil) {
				t.Errorf("first command: %v, want acknowledged=%v", err, tc.wantFirst)
			}
			if err != nil && (!errors.Is(err, errUnavailable) || !errors.Is(err, ErrProtocol)) {
				t.Errorf("first command: %v, want unavailable (protocol violation)", err)
			}
			if tc.holdSecond {
				err := second.wait(t)
				<-c.wsem
				if !errors.Is(err, errUnavailable) || !errors.Is(err, ErrProtocol) {
					t.Errorf("second command (answered before it was written): %v, want unavailable (protocol violation)", err)
				}
			}
			select {
			case err := <-reported:
				if !errors.Is(err, ErrProtocol) {
					t.Errorf("reported %v, want a protocol violation", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no protocol violation reported within 10s")
			}
			testwait.For(t, 5*time.Second, "the connection to die after the violation", c.Dead)
			if err := c.Send(time.Time{}, encLine, newResult().done); !errors.Is(err, errUnavailable) {
				t.Errorf("Send after the violation: %v, want unavailable", err)
			}
			c.Close()
			if len(reported) > 0 {
				t.Errorf("violation reported more than once: %v", <-reported)
			}
		})
	}
}

func TestClose(t *testing.T) {
	b, nc := startBroker(t, func(io.Writer, string, net.Conn) {})
	cfg := testConfig(Next)
	cfg.Goodbye = []byte("BYE 0\n")
	c := New(nc, cfg)
	r := newResult()
	if err := c.Send(time.Time{}, encLine, r.done); err != nil {
		t.Fatal(err)
	}
	b.waitReceived()
	c.Close()
	c.Close()
	if err := r.wait(t); !errors.Is(err, errClosed) {
		t.Errorf("pending command: %v, want closed", err)
	}
	if err := c.Send(time.Time{}, encLine, func(error) { t.Error("done called after a refused Send") }); !errors.Is(err, errClosed) {
		t.Errorf("send after Close: %v, want closed", err)
	}
	<-b.done // the broker saw the connection end
	if got := strings.Join(b.received(), ","); got != "C 1,BYE 0" {
		t.Errorf("broker received %q, want the command and the goodbye", got)
	}
	if n := r.calls.Load(); n != 1 {
		t.Errorf("done called %d times", n)
	}
}

// Close racing with senders: every accepted command's callback runs exactly once.
func TestCloseRacingSenders(t *testing.T) {
	_, nc := startBroker(t, okAll)
	c := New(nc, testConfig(Next))
	var (
		calls, accepted atomic.Int64
		wg              sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if c.Send(time.Time{}, encLine, func(error) { calls.Add(1) }) == nil {
					accepted.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Millisecond) // let some commands through before closing; not synchronisation
	c.Close()
	wg.Wait()
	if calls.Load() != accepted.Load() {
		t.Errorf("%d callbacks for %d accepted commands", calls.Load(), accepted.Load())
	}
}

// A silent connection writes heart-beats; the broker's heart-beats are answered with the protocol's Reply.
func TestHeartBeats(t *testing.T) {
	var pongs atomic.Int32
	b, nc := startBroker(t, func(w io.Writer, line string, _ net.Conn) {
		switch line {
		case "HB 0":
			fmt.Fprint(w, "H\n")
		case "P":
			pongs.Add(1)
		}
	})
	cfg := testConfig(Next)
	cfg.HeartBeat = 20 * time.Millisecond
	cfg.HeartBeatFrame = []byte("HB 0\n")
	c := New(nc, cfg)
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		for _, l := range b.received() {
			if l == "HB 0" {
				n++
			}
		}
		if n >= 2 && pongs.Load() >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d heart-beats and %d replies within 5s of silence, want at least 2 and 1", n, pongs.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A lone command without a deadline (an async publish) to a broker that stops answering gets its done
// within MaxWait and the grace, with no later command needed to notice: the read deadline is the
// connection's own timer. Also when the broker keeps the read loop busy with heart-beats meanwhile.
func TestLoneCommandStalls(t *testing.T) {
	cases := []struct {
		name       string
		heartBeats bool
	}{
		{"silent broker", false},
		{"broker sending heart-beats only", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var once sync.Once
			stop := make(chan struct{})
			var beats sync.WaitGroup
			_, nc := startBroker(t, func(w io.Writer, line string, _ net.Conn) {
				if !tc.heartBeats || line != "C 1" {
					return
				}
				once.Do(func() {
					beats.Go(func() {
						tick := time.NewTicker(20 * time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-stop:
								return
							case <-tick.C:
								if _, err := fmt.Fprint(w, "H\n"); err != nil {
									return
								}
							}
						}
					})
				})
			})
			t.Cleanup(func() { close(stop); beats.Wait() })
			cfg := testConfig(Next)
			cfg.MaxWait, cfg.StallGrace = 200*time.Millisecond, 100*time.Millisecond
			c := New(nc, cfg)
			defer c.Close()
			r := newResult()
			start := time.Now()
			if err := c.Send(time.Time{}, encLine, r.done); err != nil {
				t.Fatal(err)
			}
			if err := r.wait(t); !errors.Is(err, errUnavailable) || !errors.Is(err, ErrStalled) {
				t.Fatalf("got %v, want unavailable (stalled)", err)
			}
			if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
				t.Errorf("done after %v, want about MaxWait+StallGrace = 300ms", d)
			}
		})
	}
}

// Close waits up to CloseWait for the answers to commands already written: a broker still working
// gives them their real outcome instead of the Closed kind.
func TestCloseWaitsForAnswers(t *testing.T) {
	b, nc := startBroker(t, func(w io.Writer, line string, c net.Conn) {
		time.Sleep(100 * time.Millisecond) // a slow broker
		okAll(w, line, c)
	})
	cfg := testConfig(Next)
	cfg.CloseWait = 5 * time.Second
	c := New(nc, cfg)
	r := newResult()
	if err := c.Send(time.Time{}, encLine, r.done); err != nil {
		t.Fatal(err)
	}
	b.waitReceived()
	c.Close()
	if err := r.wait(t); err != nil {
		t.Errorf("command written before Close: %v, want its answer (nil)", err)
	}
}

// Two concurrent Close calls: neither returns before every callback has run and the read loop ended.
func TestConcurrentClose(t *testing.T) {
	_, nc := startBroker(t, func(io.Writer, string, net.Conn) {})
	cfg := testConfig(Next)
	cfg.CloseWait = 200 * time.Millisecond // the broker never answers: Close waits this long
	c := New(nc, cfg)
	results := make([]*result, 5)
	for i := range results {
		results[i] = newResult()
		if err := c.Send(time.Time{}, encLine, results[i].done); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for k := range 2 {
		wg.Go(func() {
			c.Close()
			for i, r := range results {
				if n := r.calls.Load(); n != 1 {
					t.Errorf("Close #%d returned with done of command %d called %d times", k+1, i, n)
				}
			}
			select {
			case <-c.readDone:
			default:
				t.Errorf("Close #%d returned before the read loop ended", k+1)
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		if err := r.wait(t); !errors.Is(err, errClosed) {
			t.Errorf("command %d: %v, want closed", i, err)
		}
	}
}

// TestSendAfterRetire: a connection the broker closed is retired with Close (what the pool does
// before redialling); a Send that still reaches it fails Unavailable, since only our own Close of a
// live connection is a shutdown (the "closed" result of the metrics).
func TestSendAfterRetire(t *testing.T) {
	for _, tc := range []struct {
		name       string
		brokerGone bool
		want       error
	}{
		{"the broker closed it, then Close", true, errUnavailable},
		{"Close of a live connection", false, errClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, nc := startBroker(t, func(_ io.Writer, _ string, conn net.Conn) { conn.Close() })
			c := New(nc, testConfig(Next))
			if tc.brokerGone {
				r := newResult()
				if err := c.Send(time.Time{}, encLine, r.done); err != nil {
					t.Fatal(err)
				}
				if err := r.wait(t); !errors.Is(err, errUnavailable) {
					t.Fatalf("command on the closed connection: %v, want unavailable", err)
				}
				<-b.done
			}
			c.Close()
			err := c.Send(time.Time{}, encLine, func(error) { t.Error("done called after a refused Send") })
			if !errors.Is(err, tc.want) || (tc.want == errUnavailable && errors.Is(err, errClosed)) {
				t.Errorf("Send: %v, want %v", err, tc.want)
			}
		})
	}
}

// failingWrites is a connection whose writes fail while reads wait for the peer.
type failingWrites struct{ net.Conn }

func (failingWrites) Write([]byte) (int, error) { return 0, errors.New("broken pipe (test)") }

// A connection whose write broke and which is closed (replaced by the pool) before its read loop gave
// up fails what it held as unavailable: the broker's side broke. Closed means mqtarget is shutting down.
func TestCloseAfterBrokenWrite(t *testing.T) {
	_, nc := startBroker(t, func(io.Writer, string, net.Conn) {})
	c := New(failingWrites{nc}, testConfig(Next))
	r := newResult()
	if err := c.Send(time.Time{}, encLine, r.done); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the failed write to mark the connection dead", c.Dead)
	c.Close()
	if err := r.wait(t); !errors.Is(err, errUnavailable) || errors.Is(err, errClosed) {
		t.Errorf("command on a connection closed after its write broke: %v, want unavailable, not closed", err)
	}
}

var errTimeout = errors.New("timeout")

// frozenUntil is a broker that stops reading at the first big command ("B 1", see encBig) until thaw is
// closed, as one that stops reading its socket does; it answers "C <id>" and the end of a big command,
// "E <id>", once it has read them.
func frozenUntil(thaw <-chan struct{}) func(io.Writer, string, net.Conn) {
	return func(w io.Writer, line string, _ net.Conn) {
		switch {
		case line == "B 1":
			<-thaw
		case strings.HasPrefix(line, "C "), strings.HasPrefix(line, "E "):
			fmt.Fprintf(w, "A %s ok\n", line[2:])
		}
	}
}

// encBig encodes a command of about size bytes, "B <id>", padding lines, "E <id>": far more than the
// socket buffers (about 4 MiB on loopback), so its write blocks while the broker does not read.
func encBig(size int) func(b []byte, id uint64) []byte {
	pad := bytes.Repeat(append(bytes.Repeat([]byte{'x'}, 64<<10-1), '\n'), size>>16)
	return func(b []byte, id uint64) []byte {
		b = fmt.Appendf(b, "B %d\n", id)
		b = append(b, pad...)
		return fmt.Appendf(b, "E %d\n", id)
	}
}

// encBody encodes a command of size bytes of padding and "C <id>".
func encBody(size int) func(b []byte, id uint64) []byte {
	pad := append(bytes.Repeat([]byte{'x'}, size-1), '\n')
	return func(b []byte, id uint64) []byte { return encLine(append(b, pad...), id) }
}

// frozenConn is a connection to a broker that stopped reading while a 32 MiB command without deadline
// (an async publish, 30 s to be answered) is being written; thaw makes it read and answer again.
func frozenConn(t *testing.T) (c *Conn, b *broker, head *result, thaw func()) {
	t.Helper()
	frozen := make(chan struct{})
	thaw = sync.OnceFunc(func() { close(frozen) })
	b, nc := startBroker(t, frozenUntil(frozen))
	t.Cleanup(thaw) // before startBroker's cleanup, which waits for the broker
	cfg := testConfig(ByID)
	cfg.MaxWait, cfg.StallGrace, cfg.Timeout = 30*time.Second, 100*time.Millisecond, errTimeout
	c = New(nc, cfg)
	t.Cleanup(c.Close)
	head = newResult()
	if err := c.Send(time.Time{}, encBig(32<<20), head.done); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the writer to start writing the big command", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing == 1
	})
	return c, b, head, thaw
}

// commandsReceived lists the ids of the "C <id>" commands the broker read.
func (b *broker) commandsReceived() []string {
	var ids []string
	for _, l := range b.received() {
		if id, ok := strings.CutPrefix(l, "C "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// A command whose caller left while it was queued behind a blocked write is dropped, not written: when
// the broker reads again, the write ahead of it completes and is answered (the dropped command's deadline,
// past already, is not the next write's, which would fail the connection as stalled), the dropped
// command's done gets a timeout (certainly not stored), and the broker never sees it.
func TestExpiredCommandNotWritten(t *testing.T) {
	c, b, head, thaw := frozenConn(t)
	late := newResult()
	by := time.Now().Add(20 * time.Millisecond)
	if err := c.Send(by, encLine, late.done); err != nil {
		t.Fatal(err)
	}
	// Its caller leaves at by (answered 504); the broker thaws once by and the stall grace have passed.
	time.Sleep(time.Until(by.Add(200 * time.Millisecond))) // a point in time to pass, not a condition
	if writes, _ := c.Stats(); writes != 0 {
		t.Fatal("test setup: the big command was written while the broker did not read")
	}
	thaw()
	if err := head.wait(t); err != nil {
		t.Errorf("command written while the broker was frozen, answered once it thawed: %v, want nil", err)
	}
	if err := late.wait(t); !errors.Is(err, ErrExpired) || !errors.Is(err, errTimeout) {
		t.Errorf("command whose caller left: %v, want timeout (expired, not written)", err)
	}
	if c.Dead() {
		t.Errorf("connection failed: %v", c.Err())
	}
	c.Close()
	<-b.done // the broker has read everything written
	if ids := b.commandsReceived(); len(ids) != 0 {
		t.Errorf("broker received commands %v, want none (the late one dropped)", ids)
	}
	if head.calls.Load() != 1 || late.calls.Load() != 1 {
		t.Errorf("done called %d and %d times, want once each", head.calls.Load(), late.calls.Load())
	}
}

// What a connection holds queued and not written is bounded while the broker does not read: queued
// commands whose callers left make room (dropped unwritten, their done a timeout); beyond the bound
// Send refuses at once (unavailable, done never called); a command of any size passes when nothing waits.
func TestQueueBounded(t *testing.T) {
	cases := []struct {
		name       string
		maxQueued  int
		maxSpans   int
		size       int  // bytes of each command
		n          int  // commands sent
		abandoned  bool // each caller leaves at a deadline 1 ms away, before the next comes
		wantQueued int  // how many are accepted (0: all)
	}{
		{"callers that left make room", 256 << 10, 1000, 64 << 10, 100, true, 0},
		{"live commands beyond the byte bound are refused", 256 << 10, 1000, 64 << 10, 20, false, 4},
		{"live commands beyond the count bound are refused", 1 << 20, 8, 16, 20, false, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, b, head, thaw := frozenConn(t)
			c.maxQueued, c.maxSpans = tc.maxQueued, tc.maxSpans // no Send is running
			var (
				accepted []*result
				refused  int
				most     int
			)
			for range tc.n {
				var by time.Time // live: no deadline, 30 s to be answered
				if tc.abandoned {
					by = time.Now().Add(time.Millisecond)
				}
				r := newResult()
				err := c.Send(by, encBody(tc.size), r.done)
				c.mu.Lock()
				most = max(most, len(c.queued))
				c.mu.Unlock()
				switch {
				case err == nil:
					accepted = append(accepted, r)
				case errors.Is(err, ErrBacklog) && errors.Is(err, errUnavailable):
					refused++
				default:
					t.Fatalf("Send: %v, want nil or unavailable (backlog)", err)
				}
				if tc.abandoned {
					time.Sleep(time.Until(by)) // the caller's deadline: it has left (504)
				}
			}
			if bound := tc.maxQueued + tc.size + 16; most > bound {
				t.Errorf("%d bytes queued at most, want at most %d (the bound and one command)", most, bound)
			}
			want := tc.wantQueued
			if want == 0 {
				want = tc.n
			}
			if len(accepted) != want || refused != tc.n-want {
				t.Errorf("%d accepted, %d refused, want %d and %d", len(accepted), refused, want, tc.n-want)
			}
			thaw()
			if err := head.wait(t); err != nil {
				t.Errorf("the big command: %v, want nil", err)
			}
			for i, r := range accepted {
				err := r.wait(t)
				if tc.abandoned && (!errors.Is(err, ErrExpired) || !errors.Is(err, errTimeout)) {
					t.Errorf("command %d, abandoned: %v, want timeout (expired, not written)", i, err)
				}
				if !tc.abandoned && err != nil {
					t.Errorf("command %d: %v, want nil", i, err)
				}
			}
			c.Close()
			<-b.done
			wantSeen := len(accepted)
			if tc.abandoned {
				wantSeen = 0
			}
			if ids := b.commandsReceived(); len(ids) != wantSeen {
				t.Errorf("broker received %d commands, want %d (the accepted live ones)", len(ids), wantSeen)
			}
			calledOnce(t, accepted)
		})
	}
}

// A command larger than the bound passes when nothing else waits: the bound refuses callers behind a
// backlog, never a message for its size.
func TestLargeCommandPassesAlone(t *testing.T) {
	_, nc := startBroker(t, okAll)
	c := New(nc, testConfig(ByID))
	defer c.Close()
	c.maxQueued = 64 << 10
	r := newResult()
	if err := c.Send(time.Time{}, encBody(1<<20), r.done); err != nil {
		t.Fatalf("Send of 1 MiB with a 64 KiB bound and nothing queued: %v", err)
	}
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
}

// TestAnswerGuessedForTheNext: a broker answers command 1 and, in the same write, guesses an answer for
// command 2, which it has not got. The read loop runs 1's callback before it parses the guess; here the
// caller then sends command 2 and the writer starts writing it before the guess is parsed (the read
// loop is held until then, as a busy machine may hold it). The guess came in bytes read before 2's
// write started: it must fail the connection, not acknowledge 2.
func TestAnswerGuessedForTheNext(t *testing.T) {
	for _, kind := range []AnswerKind{Next, ByID} {
		t.Run(map[AnswerKind]string{Next: "in order", ByID: "by id"}[kind], func(t *testing.T) {
			_, nc := startBroker(t, func(w io.Writer, line string, _ net.Conn) {
				if line == "C 1" {
					fmt.Fprint(w, "A 1 ok\nA 2 ok\n") // one write: both arrive in one read
				}
			})
			cfg := testConfig(kind)
			var c *Conn
			read, calls := cfg.Read, 0
			cfg.Read = func(r *bufio.Reader) (Answer, error) {
				if calls++; calls == 2 { // the guess, already buffered: wait for command 2's write
					testwait.For(t, 5*time.Second, "command 2's write to start", func() bool {
						c.mu.Lock()
						defer c.mu.Unlock()
						return c.writing >= 2
					})
				}
				return read(r)
			}
			reported := make(chan error, 4)
			cfg.ProtocolError = func(err error) { reported <- err }
			c = New(nc, cfg)
			defer c.Close()
			first, second := newResult(), newResult()
			if err := c.Send(time.Time{}, encLine, first.done); err != nil {
				t.Fatal(err)
			}
			if err := first.wait(t); err != nil {
				t.Fatalf("first command: %v, want acknowledged", err)
			}
			if err := c.Send(time.Time{}, encLine, second.done); err != nil {
				t.Fatal(err)
			}
			if err := second.wait(t); !errors.Is(err, errUnavailable) || !errors.Is(err, ErrProtocol) {
				t.Fatalf("second command: %v; want unavailable (protocol violation): its answer was read before it was written", err)
			}
			if err := <-reported; !errors.Is(err, ErrProtocol) {
				t.Errorf("reported %v, want a protocol violation", err)
			}
		})
	}
}
