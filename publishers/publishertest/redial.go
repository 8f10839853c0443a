package publishertest

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/logtest"
	"github.com/mqtarget/mqtarget/publishers"
)

// The redial policy's tests, shared by the broker packages: each supplies its publisher and a server
// speaking enough of its protocol to misbehave.

// FlapServer is a misbehaving broker on 127.0.0.1: every connection it accepts is served by serve
// (a handshake, then a close, say), or by good once the test switched it to behave.
type FlapServer struct {
	Accepted atomic.Int64 // connections accepted
	Behave   atomic.Bool  // serve the next connections with good

	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartFlapServer starts a FlapServer that the test's cleanup stops.
func StartFlapServer(t *testing.T, serve, good func(net.Conn)) *FlapServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &FlapServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.Accepted.Add(1)
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() {
				defer func() {
					c.Close()
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
				}()
				if s.Behave.Load() {
					good(c)
				} else {
					serve(c)
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.DropConns()
		s.wg.Wait()
	})
	return s
}

// Addr is the server's address.
func (s *FlapServer) Addr() string { return s.ln.Addr().String() }

// DropConns closes every connection the server holds.
func (s *FlapServer) DropConns() {
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

// RefusedAddr is a port nobody listens on.
func RefusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// ShortBackoff is short, so that a half-second window spans many backoff periods.
var ShortBackoff = publishers.Backoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond, Healthy: time.Second, Churn: 50 * time.Millisecond, ChurnBurst: 5}

// MaxDials bounds the dials one host may see in window under b with slots connections: at most one
// per slot and backoff period, the periods being at least half their nominal length (equal jitter),
// plus, for connections that answered before they died, one per slot and Churn and a burst of
// ChurnBurst.
func MaxDials(b publishers.Backoff, window time.Duration, slots int, answered bool) int {
	periods, t := 1, time.Duration(0)
	for n := 1; ; n++ {
		t += min(b.Max, b.Base<<min(n-1, 30)) / 2
		if t > window {
			break
		}
		periods++
	}
	if answered {
		periods += int(window/b.Churn) + max(b.ChurnBurst, 1)
	}
	return slots * (periods + 1)
}

// Redialer is what the redial tests drive.
type Redialer interface {
	Publish(ctx context.Context, host int, topic string, body []byte) error
	Close() error
}

// RedialCase is one broker behaviour RunRedialBounded drives a publisher against.
type RedialCase struct {
	Name     string
	Pub      func(*testing.T, string, *slog.Logger) Redialer
	Serve    func(net.Conn) // nil: the connection is refused
	Good     func(net.Conn)
	Slots    int
	Answered bool // the broker answers a command before it closes
	Probes   int  // extra connections: a size probe, once per slot at most
}

// RunRedialBounded: against a broker that fails every connection it accepts (closing right after
// the handshake, answering one command and closing, or refusing the connection), each publisher dials
// within its backoff (ShortBackoff) and logs a few lines, however hard it is driven; once the broker
// behaves, its publishes succeed again.
func RunRedialBounded(t *testing.T, cases []RedialCase) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			var srv *FlapServer
			addr := ""
			if tc.Serve != nil {
				srv = StartFlapServer(t, tc.Serve, tc.Good)
				addr = srv.Addr()
			} else {
				addr = RefusedAddr(t)
			}
			log, logs := logtest.Logger()
			p := tc.Pub(t, addr, log)
			t.Cleanup(func() { p.Close() })

			// Four clients publishing as fast as the publisher answers, for half a second.
			var published atomic.Int64
			elapsed := Hammer(4, 500*time.Millisecond, func() {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				_ = p.Publish(ctx, 0, "t", []byte("m"))
				cancel()
				published.Add(1)
			})
			var dials int64
			if srv != nil {
				dials = srv.Accepted.Load()
			} else if cc, ok := p.(publishers.ConnCounter); ok {
				dials = int64(cc.ConnCounts(0).DialFailures)
			}
			bound := MaxDials(ShortBackoff, elapsed, tc.Slots, tc.Answered) + tc.Probes
			t.Logf("%d publishes, %d dials in %v (bound %d)", published.Load(), dials, elapsed.Round(time.Millisecond), bound)
			if dials > int64(bound) {
				t.Errorf("%d dials in %v, want at most %d under the backoff", dials, elapsed.Round(time.Millisecond), bound)
			}
			if n := len(logs.Lines()); n > 8 {
				t.Errorf("%d warning lines in %v, want a few: %v", n, elapsed.Round(time.Millisecond), logs.Counts())
			}
			if srv == nil {
				return
			}
			srv.Behave.Store(true)
			deadline := time.Now().Add(5 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := p.Publish(ctx, 0, "t", []byte("m"))
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the broker behaves again, publishing still fails: %v", err)
				}
				time.Sleep(10 * time.Millisecond) // polling within the deadline
			}
		})
	}
}

// Pinger is what RunPingBounded drives.
type Pinger interface {
	Ping(ctx context.Context, host int) error
	Close() error
}

// PingCase is one publisher RunPingBounded checks.
type PingCase struct {
	Name  string
	Serve func(net.Conn)
	Pub   func(t *testing.T, addr string) Pinger
	Pool  bool // Ping may dial a pool connection too (with a size probe)
}

// RunPingBounded: health checks (/readyz pings every host per request) make at most one connection
// per host and publishers.PingReuse, however many run, and the pool's own dials stay under the backoff.
func RunPingBounded(t *testing.T, cases []PingCase) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			srv := StartFlapServer(t, tc.Serve, nil)
			p := tc.Pub(t, srv.Addr())
			defer p.Close()
			elapsed := Hammer(4, 500*time.Millisecond, func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = p.Ping(ctx, 0)
				cancel()
			})
			bound := int(elapsed/publishers.PingReuse) + 2
			if tc.Pool {
				bound += MaxDials(publishers.DefaultBackoff(), elapsed, 1, false) + 1
			}
			dials := srv.Accepted.Load()
			t.Logf("%d connections in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
			if dials > int64(bound) {
				t.Errorf("%d connections in %v of pings, want at most %d", dials, elapsed.Round(time.Millisecond), bound)
			}
		})
	}
}

// Hammer runs call in a loop on each of clients goroutines, the next call as soon as one returns,
// until d has passed; it returns the time from its start until every client stopped.
func Hammer(clients int, d time.Duration, call func()) time.Duration {
	start := time.Now()
	stop := Loop(clients, call)
	time.Sleep(d)
	stop()
	return time.Since(start)
}

// Loop runs call in a loop on each of clients goroutines, the next call as soon as one returns, until
// the stop it returns is called (for a test that acts while the clients run; Hammer stops it after a
// duration); stop returns once every client stopped, and may be called again.
func Loop(clients int, call func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				call()
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { close(done) }); wg.Wait() }
}

// CloseAtOnce is a FlapServer's "then": the handshake done, it closes.
func CloseAtOnce(*bufio.Reader, net.Conn) {}
