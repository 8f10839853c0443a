package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/testwait"
)

// startApp starts mqtarget on an ephemeral port with external brokers nothing listens on (only the
// pings at start dial them).
func startApp(t *testing.T, mod func(*config.Config)) *App {
	t.Helper()
	a, err := Start(testConfig(mod), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return a
}

// testConfig is the default configuration on an ephemeral port with external brokers nothing listens on,
// changed by mod.
func testConfig(mod func(*config.Config)) config.Config {
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.NSQ.Hosts = []string{"127.0.0.1:1"}
	cfg.STOMP.Hosts = []string{"127.0.0.1:1"}
	mod(&cfg)
	return cfg
}

// keepAliveClient sends requests one after the other on one connection until an answer says
// "Connection: close"; any request without an answer is an error. warm is signalled after the first answer.
func keepAliveClient(addr string, warm func()) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: mqtarget\r\n\r\n"); err != nil {
			return fmt.Errorf("request %d: %w", n, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("request %d sent, no answer: %w", n, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("request %d: status %d", n, resp.StatusCode)
		}
		if n == 1 {
			warm()
		}
		if resp.Close {
			return nil
		}
	}
}

// TestLameDuckKeepAlive: on shutdown, clients busy on keep-alive connections get an answer to every
// request they sent (the last one saying "Connection: close"), never a reset, and /readyz reports the
// shutdown while it is still served.
func TestLameDuckKeepAlive(t *testing.T) {
	a := startApp(t, func(c *config.Config) { c.ShutdownLameDuck = 3 * time.Second })
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()

	const clients = 50
	var warm, done sync.WaitGroup
	warm.Add(clients)
	errs := make(chan error, clients)
	for range clients {
		done.Add(1)
		go func() {
			defer done.Done()
			var once sync.Once
			err := keepAliveClient(a.Addr(), func() { once.Do(warm.Done) })
			once.Do(warm.Done) // a client that failed at once must not hold up the test
			errs <- err
		}()
	}
	warm.Wait()
	stop()

	// /readyz says so during the lame-duck phase, on a fresh connection.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(3 * time.Second)
	for {
		resp, err := client.Get("http://" + a.Addr() + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the lame-duck phase: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), `"shutting_down":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d %s, want 503 shutting_down", resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, bounded by the deadline
	}

	done.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			if failed <= 5 {
				t.Error(err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d keep-alive clients lost a request", failed, clients)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the lame-duck phase and the shutdown")
	}
}

// TestLimitListener: past the limit, with every connection busy, Accept waits until a connection closes;
// Close ends a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 2)
	defer l.Close()
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String()) // completes in the kernel backlog
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var accepted []net.Conn
	for range 2 {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		l.connState(c, http.StateActive) // busy: never evicted
		accepted = append(accepted, c)
	}
	third := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		third <- c
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted with 2 open and a limit of 2")
	case <-time.After(100 * time.Millisecond): // absence can only be observed for a while
	}
	accepted[0].Close()
	accepted[0].Close() // a second Close must not free a second slot
	select {
	case c := <-third:
		if c == nil {
			t.Fatal("Accept failed after a slot was freed")
		}
		l.connState(c, http.StateActive)
		accepted = append(accepted, c)
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waiting after a connection closed")
	}
	// Two are open again: the next Accept waits, and Close ends it.
	ended := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		ended <- err
	}()
	l.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("Accept after Close succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a waiting Accept")
	}
	for _, c := range accepted[1:] {
		c.Close()
	}
}

// TestMaxConnectionsIdleEvicted: with http.max_connections taken by clients that keep their
// connections without using them (idle keep-alive after an answer; connected and silent; an answer never
// read; answers pipelined and never read, stuck in the server's writes), a new client is served at once
// (or, behind stuck writes, once the holders' socket buffers are full and minEvictStuck has passed, well
// before http.write_timeout), the connection it displaces being closed.
func TestMaxConnectionsIdleEvicted(t *testing.T) {
	a := startApp(t, func(c *config.Config) {
		c.HTTP.MaxConnections = 2
		// Far past the client's deadline below, so only eviction can serve it in time. The pipelined
		// case needs the room: filling a holder's send buffer (up to tcp_wmem's 4 MiB of /metrics
		// answers) took 2.2 s on a quiet machine, 5 s beside four CPU hogs, past 10 s in a loaded CI.
		c.HTTP.IdleTimeout = 5 * time.Minute
		c.HTTP.ReadHeaderTimeout = 5 * time.Minute
		c.HTTP.WriteTimeout = 5 * time.Minute
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	get := func(c net.Conn, br *bufio.Reader) error {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: mqtarget\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	for _, tc := range []struct {
		name string
		hold func(c net.Conn, br *bufio.Reader) error // what each of the two holders does, then nothing
	}{
		{"idle keep-alive", get},
		{"connected, silent", func(net.Conn, *bufio.Reader) error { return nil }},
		{"answer never read", func(c net.Conn, _ *bufio.Reader) error {
			_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: mqtarget\r\n\r\n")
			return err
		}},
		{"answers pipelined and never read", func(c net.Conn, _ *bufio.Reader) error {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096) // a small window fills at once
			}
			go func() { // pipelines until the server gives up on the connection
				req := []byte("GET /metrics HTTP/1.1\r\nHost: mqtarget\r\n\r\n")
				for {
					if _, err := c.Write(req); err != nil {
						return
					}
				}
			}()
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := a.ln.(*limitListener)
			waitFor(t, "the last case's connections closed", func() bool { return l.openConns() == 0 })
			for range 2 {
				c, err := net.Dial("tcp", a.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := tc.hold(c, bufio.NewReader(c)); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "both slots taken", func() bool { return l.openConns() == 2 })
			c, err := net.Dial("tcp", a.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Without eviction: the idle timeout or http.write_timeout (5 min each).
			start := time.Now()
			_ = c.SetDeadline(start.Add(90 * time.Second))
			if err := get(c, bufio.NewReader(c)); err != nil {
				t.Fatalf("a client behind two idle connections, after %v: %v", time.Since(start).Round(time.Millisecond), err)
			}
		})
	}
}

// TestHTTPLimits: the http.* limits reach the server mqtarget runs.
func TestHTTPLimits(t *testing.T) {
	a := startApp(t, func(c *config.Config) {
		// A read timeout past the write timeout: the 408 must still be written (the body's end, here its
		// timeout, restarts the write deadline).
		c.HTTP.ReadTimeout = 600 * time.Millisecond
		c.HTTP.WriteTimeout = 400 * time.Millisecond
		c.PublishTimeout = 300 * time.Millisecond
		c.NSQ.DialTimeout = 100 * time.Millisecond
		c.STOMP.DialTimeout = 100 * time.Millisecond
		c.Readyz.Timeout = 100 * time.Millisecond
		c.HTTP.MaxHeaderBytes = 4096
		c.HTTP.MaxConnections = 3
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	if l, ok := a.ln.(*limitListener); !ok || cap(l.slots) != 3 {
		t.Errorf("listener %T, want a limitListener of 3 (http.max_connections)", a.ln)
	}
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"http.read_timeout", "POST /send1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", http.StatusRequestTimeout},
		{"http.max_header_bytes", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 8192) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", a.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // without the limit: no answer at all
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

// reconnectingClient behaves like one connection of wrk or hey: it sends a request, reads the answer,
// sends the next, and reconnects at once after an answer with "Connection: close" or a connection
// error, until it cannot connect any more (the listener is closed) or stop is closed. It counts every
// request written and every answer read: each request it wrote without an answer is one lost.
type reconnectingClient struct {
	sent, answered atomic.Int64
	ok2xx          atomic.Int64
	lastErr        atomic.Value // string: the last error after a request was sent
	// raced counts requests lost as docs/operations.md says one still can be: the first request of a
	// connection whose handshake completed in the instant the listener closed, reset.
	raced atomic.Int64
}

func (rc *reconnectingClient) run(addr string, paths []string, stop <-chan struct{}) {
	for k := 0; ; {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return // refused: the server is gone; no request was sent
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		for first := true; ; first = false {
			p := paths[k%len(paths)]
			k++
			if _, err := io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: mqtarget\r\n\r\n"); err != nil {
				// A write that fails may still have left: it counts as sent.
				rc.sent.Add(1)
				rc.lastErr.Store(p + ": write: " + err.Error())
				break
			}
			rc.sent.Add(1)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				rc.lastErr.Store(p + ": " + err.Error())
				if first && errors.Is(err, syscall.ECONNRESET) {
					rc.raced.Add(1)
				}
				break
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				rc.lastErr.Store(p + ": body: " + err.Error())
				break
			}
			rc.answered.Add(1)
			if resp.StatusCode/100 == 2 {
				rc.ok2xx.Add(1)
			}
			if resp.Close {
				break
			}
		}
		c.Close()
	}
}

// TestShutdownReconnectingClients: clients that reconnect at once after "Connection: close", as load
// generators do, get an answer to every request they sent through a shutdown (SIGTERM: Run's context
// ends), with and without a lame-duck phase; the shutdown's drain leaves none in the listen backlog to
// be reset.
func TestShutdownReconnectingClients(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lameDuck time.Duration
		embedded bool // an embedded nsqd; else the brokers are unreachable and send endpoints answer 503 at once
		paths    []string
	}{
		{"lame duck, /healthz", 500 * time.Millisecond, false, []string{"/healthz"}},
		{"no lame duck, /healthz", 0, false, []string{"/healthz"}},
		{"lame duck, send endpoints failing", 500 * time.Millisecond, false, []string{"/send1", "/sendAsync", "/healthz"}},
		{"lame duck, send endpoints publishing", 500 * time.Millisecond, true, []string{"/send1", "/sendAsync"}},
		{"no lame duck, send endpoints publishing", 0, true, []string{"/sendAsync", "/send1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mod := func(c *config.Config) { c.ShutdownLameDuck = tc.lameDuck }
			cfg := testConfig(mod)
			if tc.embedded {
				cfg = testConfig(func(c *config.Config) {
					mod(c)
					c.NSQ.Hosts, c.NSQ.Embedded = nil, 1
					c.Echo.Enabled, c.Echo.RoundTrip = false, false
				})
			}
			a, err := Start(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			ctx, sigterm := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- a.Run(ctx) }()

			const n = 50
			clients := make([]reconnectingClient, n)
			stop := make(chan struct{})
			var done sync.WaitGroup
			for i := range clients {
				done.Go(func() { clients[i].run(a.Addr(), tc.paths, stop) })
			}
			waitFor(t, "every client answered", func() bool {
				for i := range clients {
					if clients[i].answered.Load() == 0 {
						return false
					}
				}
				return true
			})
			sigterm()
			select {
			case <-ran:
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return")
			}
			close(stop) // a client still connecting to a port reused meanwhile stops
			done.Wait()
			var sent, answered, ok, raced int64
			for i := range clients {
				s, a := clients[i].sent.Load(), clients[i].answered.Load()
				sent += s
				answered += a
				ok += clients[i].ok2xx.Load()
				raced += clients[i].raced.Load()
				if s != a {
					t.Logf("client %d: %d sent, %d answered, last error %v", i, s, a, clients[i].lastErr.Load())
				}
			}
			t.Logf("%d requests sent, %d answered, %d with 2xx", sent, answered, ok)
			if tc.embedded && ok == 0 {
				t.Error("no request was published")
			}
			// At most one loss of the race docs/operations.md lists (a connection made in the instant the
			// listener closes); any other loss, or more of those, fails.
			if lost := sent - answered; lost > min(raced, 1) {
				t.Errorf("%d of %d requests sent got no answer (%d of them the first on a connection made as the listener closed, reset)", lost, sent, raced)
			} else if lost > 0 {
				t.Logf("%d request lost to the race docs/operations.md lists: the first on a connection made as the listener closed, reset", lost)
			}
		})
	}
}

// TestShutdownWaitsForUnreadConnections: a client whose connection sat idle when the shutdown began
// (after an answer, or since it connected), and that sends its request on it a moment later (a load
// generator descheduled between an answer and its next request, or between its connect and its
// request), gets an answer (closing the connection), not a close: the drain waits for such
// connections before http.Server.Shutdown, after which net/http closes a connection unanswered when
// its request arrives.
func TestShutdownWaitsForUnreadConnections(t *testing.T) {
	for _, tc := range []struct {
		name     string
		warm     bool // a request answered before the shutdown: the connection is an idle keep-alive one
		maxConns int  // http.max_connections; 0: no limit, the connections are tracked all the same
	}{
		{"idle keep-alive", true, 100},
		{"connected, nothing sent", false, 100},
		{"idle keep-alive, no connection limit", true, 0},
		{"connected, nothing sent, no connection limit", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Start(testConfig(func(c *config.Config) {
				c.ShutdownLameDuck = 0
				c.HTTP.MaxConnections = tc.maxConns
			}), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			ctx, sigterm := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- a.Run(ctx) }()
			defer func() { sigterm(); <-ran }()

			c, err := net.Dial("tcp", a.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			get := func() (*http.Response, error) {
				if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: mqtarget\r\n\r\n"); err != nil {
					return nil, err
				}
				resp, err := http.ReadResponse(br, nil)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				return resp, err
			}
			if tc.warm {
				if resp, err := get(); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
					t.Fatalf("before the shutdown: %v %v, want 200 keeping the connection", resp, err)
				}
			}
			sigterm()
			// The client's pause: longer than the drain's quiet period (drainQuiet), well inside drainMax.
			time.Sleep(4 * drainQuiet)
			resp, err := get()
			if err != nil {
				t.Fatalf("request sent during the shutdown: %v, want an answer", err)
			}
			if resp.StatusCode != http.StatusOK || !resp.Close {
				t.Fatalf("during the shutdown: %d close=%v, want 200 closing the connection", resp.StatusCode, resp.Close)
			}
		})
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

// nonReader pipelines GET path on a fresh connection to addr as fast as the connection takes them and
// never reads (readEvery 0), or reads one byte every readEvery, like a client stuck on a slow link.
// It returns how long the server kept the connection, or an error when it still had it after limit.
func nonReader(addr, path string, readEvery, limit time.Duration) (time.Duration, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		// A small receive window fills at once, as a slow client's does.
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetDeadline(start.Add(limit))
	if readEvery > 0 {
		go func() {
			b := make([]byte, 1)
			for {
				if _, err := c.Read(b); err != nil {
					return
				}
				time.Sleep(readEvery) // the slow reader's pace
			}
		}()
	}
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: mqtarget\r\n\r\n")
	for {
		if _, err := c.Write(req); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return 0, fmt.Errorf("%s: the server still held the connection after %v", path, limit)
			}
			return time.Since(start), nil // reset: the server gave up on it
		}
	}
}

// TestNonReadingClients: a client that never reads its answers, or reads them a byte at a time, loses
// its connection about http.write_timeout after its last answer was due, on every route and on the
// admin listener, and so cannot lock others out through http.max_connections.
func TestNonReadingClients(t *testing.T) {
	const writeTimeout = 500 * time.Millisecond
	a := startApp(t, func(c *config.Config) {
		c.PublishTimeout = 200 * time.Millisecond
		c.NSQ.DialTimeout = 100 * time.Millisecond
		c.STOMP.DialTimeout = 100 * time.Millisecond
		c.Readyz.Timeout = 100 * time.Millisecond
		c.HTTP.WriteTimeout = writeTimeout
		c.HTTP.AdminAddr = "127.0.0.1:0"
		c.HTTP.MaxConnections = 2
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	// Without a write timeout the connection is held for ever. With it, a non-reader holds its
	// connection while the answers to its pipelined requests fill the socket buffers (the kernel's
	// send buffer grows to megabytes on loopback: a few hundred /metrics answers), then write_timeout:
	// 1–8.5 s here on a quiet run, 4–8 s with four busy loops on the two cores, over 10 s in a CI run,
	// and over 60 s for one of two non-readers at once in a CI run whose RabbitMQ restarted meanwhile
	// (making each answer takes CPU). The bound is for a server that never lets go, not a race.
	const limit = 360 * writeTimeout
	for _, tc := range []struct {
		name, addr, path string
		readEvery        time.Duration
	}{
		{"/metrics, never read", a.Addr(), "/metrics", 0},
		{"/stats, never read", a.Addr(), "/stats", 0},
		{"/, never read", a.Addr(), "/", 0},
		{"/send1, never read", a.Addr(), "/send1?topic=" + strings.Repeat("t", 60), 0},
		{"/metrics, a byte every 100ms", a.Addr(), "/metrics", 100 * time.Millisecond},
		{"admin /metrics, never read", a.AdminAddr(), "/metrics", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, err := nonReader(tc.addr, tc.path, tc.readEvery, limit)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("connection held %v", held.Round(time.Millisecond))
		})
	}
	t.Run("http.max_connections held by non-readers", func(t *testing.T) {
		results := make(chan error, 2)
		for range 2 { // every slot
			go func() { _, err := nonReader(a.Addr(), "/metrics", 0, limit); results <- err }()
		}
		l := a.ln.(*limitListener)
		waitFor(t, "the non-readers holding both slots", func() bool { return l.openConns() == 2 })
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: limit}
		resp, err := client.Get("http://" + a.Addr() + "/healthz")
		if err != nil {
			t.Fatalf("a client behind two non-readers: %v", err)
		}
		resp.Body.Close()
		for range 2 {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
	})
}
