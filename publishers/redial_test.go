package publishers

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/logtest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

// flapServer is a misbehaving broker on 127.0.0.1: every connection it accepts is served by serve
// (a handshake, then a close, say), or by good once the test switched it to behave.
type flapServer struct {
	ln       net.Listener
	accepted atomic.Int64
	behave   atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func startFlapServer(t *testing.T, serve, good func(net.Conn)) *flapServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &flapServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
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
				if s.behave.Load() {
					good(c)
				} else {
					serve(c)
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *flapServer) addr() string { return s.ln.Addr().String() }

// refusedAddr is a port nobody listens on.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// nsqHandshakeThen reads the magic and IDENTIFY, answers OK (an nsqd without feature negotiation)
// and runs then.
func nsqHandshakeThen(then func(*bufio.Reader, net.Conn)) func(net.Conn) {
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		if _, err := io.ReadFull(r, make([]byte, 4)); err != nil {
			return
		}
		if line, err := r.ReadString('\n'); err != nil || line != "IDENTIFY\n" {
			return
		}
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		if _, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
			return
		}
		_, _ = c.Write(nsqTestFrame(0, "OK"))
		then(r, c)
	}
}

func nsqTestFrame(frameType uint32, data string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(data)))
	b = binary.BigEndian.AppendUint32(b, frameType)
	return append(b, data...)
}

// nsqServeOK answers every PUB with OK, and the size probe with nsqd's refusal.
func nsqServeOK(r *bufio.Reader, c net.Conn) { nsqServe(r, c, nil) }

// nsqServe is nsqServeOK counting the size probes in probes, unless it is nil.
func nsqServe(r *bufio.Reader, c net.Conn, probes *atomic.Int64) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if strings.Contains(line, nsqProbeTopic) {
			if probes != nil {
				probes.Add(1)
			}
			_, _ = c.Write(nsqTestFrame(1, fmt.Sprintf("E_BAD_MESSAGE PUB message too big %d > 1048576", n)))
			return
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return
		}
		if _, err := c.Write(nsqTestFrame(0, "OK")); err != nil {
			return
		}
	}
}

// nsqAnswerOneThenClose answers the first PUB and closes.
func nsqAnswerOneThenClose(r *bufio.Reader, c net.Conn) {
	line, err := r.ReadString('\n')
	if err != nil || strings.Contains(line, nsqProbeTopic) {
		return
	}
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return
	}
	if _, err := io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
		return
	}
	_, _ = c.Write(nsqTestFrame(0, "OK"))
}

// stompHandshakeThen reads CONNECT, answers CONNECTED and runs then.
func stompHandshakeThen(then func(*bufio.Reader, net.Conn)) func(net.Conn) {
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		if _, err := r.ReadString(0); err != nil {
			return
		}
		_, _ = io.WriteString(c, "CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00")
		then(r, c)
	}
}

// stompServeReceipts answers every frame's receipt header; answerOne stops after the first.
func stompServeReceipts(answerOne bool) func(*bufio.Reader, net.Conn) {
	return func(r *bufio.Reader, c net.Conn) {
		for {
			f, err := r.ReadString(0)
			if err != nil {
				return
			}
			_, rest, ok := strings.Cut(f, "\nreceipt:")
			if !ok {
				continue
			}
			id, _, _ := strings.Cut(rest, "\n")
			if _, err := io.WriteString(c, "RECEIPT\nreceipt-id:"+id+"\n\n\x00"); err != nil || answerOne {
				return
			}
		}
	}
}

func closeAtOnce(*bufio.Reader, net.Conn) {}

// rmqServeOK answers every request with SUCCESS; rmqAnswerOneThenClose the first only.
func rmqServe(answerOne bool) func(net.Conn) {
	return func(c net.Conn) {
		for {
			q, err := readRMQTestRequest(c)
			if err != nil {
				return
			}
			if _, err := c.Write(rmqTestResponse(0, q.opaque, "", false)); err != nil || answerOne {
				return
			}
		}
	}
}

// newRMQNativeTo is a native RocketMQ publisher for one broker at addr and the name server ns, with
// testBackoff and the logger NewRocketMQ would make of log.
func newRMQNativeTo(ns, addr string, log *slog.Logger) *RocketMQ {
	c := DefaultRocketMQConfig()
	c.NameServers = []string{ns}
	c.SendTimeout = 200 * time.Millisecond
	p := &RocketMQ{cfg: c, log: rmqTestLog(log), closing: make(chan struct{}), admin: &admin.Client{},
		brokers: []admin.Broker{{Name: "broker-a", Addr: addr}}, queues: make([]atomic.Uint32, 1)}
	p.native = newRMQNative(p)
	setRMQBackoff(p.native, testBackoff)
	return p
}

// testBackoff is short, so that a half-second window spans many backoff periods.
var testBackoff = Backoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond, Healthy: time.Second, Churn: 50 * time.Millisecond}

// maxDials bounds the dials one host may see in window under b with slots connections: at most one
// per slot and backoff period, the periods being at least half their nominal length (equal jitter),
// plus one per slot and Churn for connections that answered before they died.
func maxDials(b Backoff, window time.Duration, slots int, answered bool) int {
	periods, t := 1, time.Duration(0)
	for n := 1; ; n++ {
		t += min(b.Max, b.Base<<min(n-1, 30)) / 2
		if t > window {
			break
		}
		periods++
	}
	if answered {
		periods += int(window/b.Churn) + 1
	}
	return slots * (periods + 1)
}

// TestRedialBounded: against a broker that fails every connection it accepts (closing right after
// the handshake, answering one command and closing, or refusing the connection), each publisher dials
// within its backoff and logs a few lines, however hard it is driven; once the broker behaves, its
// publishes succeed again.
func TestRedialBounded(t *testing.T) {
	type publisher interface {
		Publish(ctx context.Context, host int, topic string, body []byte) error
		Close() error
	}
	const slots = 2
	nsqPub := func(t *testing.T, addr string, log *slog.Logger) publisher {
		c := DefaultNSQConfig()
		c.Hosts, c.ProducersPerHost = []string{addr}, slots
		p, err := NewNSQ(c, log)
		if err != nil {
			t.Fatal(err)
		}
		setPoolBackoff(p.pool, testBackoff)
		return p
	}
	stompPub := func(t *testing.T, addr string, log *slog.Logger) publisher {
		c := DefaultSTOMPConfig()
		c.Hosts, c.ConnectionsPerHost = []string{addr}, slots
		p, err := NewSTOMP(c, log)
		if err != nil {
			t.Fatal(err)
		}
		setPoolBackoff(p.pool, testBackoff)
		return p
	}
	rmqPub := func(t *testing.T, addr string, log *slog.Logger) publisher {
		p := newRMQNativeTo("127.0.0.1:1", addr, log)
		r := &rmqRoute{ready: make(chan struct{}), queues: []int{4}}
		r.at.Store(time.Now().UnixNano())
		close(r.ready)
		p.native.routes.Store("t", r)
		return p
	}
	cases := []struct {
		name     string
		pub      func(*testing.T, string, *slog.Logger) publisher
		serve    func(net.Conn) // nil: the connection is refused
		good     func(net.Conn)
		slots    int
		answered bool // the broker answers a command before it closes
		probes   int  // extra connections: NSQ's size probe, once per slot at most
	}{
		{"nsq closes after the handshake", nsqPub, nsqHandshakeThen(closeAtOnce), nsqHandshakeThen(nsqServeOK), slots, false, slots},
		{"nsq answers one PUB and closes", nsqPub, nsqHandshakeThen(nsqAnswerOneThenClose), nsqHandshakeThen(nsqServeOK), slots, true, slots},
		{"nsq refuses", nsqPub, nil, nil, slots, false, 0},
		{"stomp closes after CONNECTED", stompPub, stompHandshakeThen(closeAtOnce), stompHandshakeThen(stompServeReceipts(false)), slots, false, 0},
		{"stomp answers one receipt and closes", stompPub, stompHandshakeThen(stompServeReceipts(true)), stompHandshakeThen(stompServeReceipts(false)), slots, true, 0},
		{"stomp refuses", stompPub, nil, nil, slots, false, 0},
		{"rocketmq closes at once", rmqPub, func(net.Conn) {}, rmqServe(false), 1, false, 0},
		{"rocketmq answers one and closes", rmqPub, rmqServe(true), rmqServe(false), 1, true, 0},
		{"rocketmq refuses", rmqPub, nil, nil, 1, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var srv *flapServer
			addr := ""
			if tc.serve != nil {
				srv = startFlapServer(t, tc.serve, tc.good)
				addr = srv.addr()
			} else {
				addr = refusedAddr(t)
			}
			log, logs := logtest.Logger()
			p := tc.pub(t, addr, log)
			t.Cleanup(func() { p.Close() })

			// Four clients publishing as fast as the publisher answers, for half a second.
			start := time.Now()
			stop := start.Add(500 * time.Millisecond)
			var wg sync.WaitGroup
			var published atomic.Int64
			for range 4 {
				wg.Go(func() {
					for time.Now().Before(stop) {
						ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
						_ = p.Publish(ctx, 0, "t", []byte("m"))
						cancel()
						published.Add(1)
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			var dials int64
			if srv != nil {
				dials = srv.accepted.Load()
			} else if cc, ok := p.(ConnCounter); ok {
				dials = int64(cc.ConnCounts(0).DialFailures)
			}
			bound := maxDials(testBackoff, elapsed, tc.slots, tc.answered) + tc.probes
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
			srv.behave.Store(true)
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

// TestSTOMPConsumerRedial: a broker that drops every subscription at once is redialled under the
// backoff, not every 100 ms forever, and the consumer logs a few lines.
func TestSTOMPConsumerRedial(t *testing.T) {
	srv := startFlapServer(t, stompHandshakeThen(func(r *bufio.Reader, _ net.Conn) { _, _ = r.ReadString(0) }), nil)
	log, logs := logtest.Logger()
	c := DefaultSTOMPConfig()
	c.Hosts = []string{srv.addr()}
	cons, err := NewSTOMPConsumer(c, log)
	if err != nil {
		t.Fatal(err)
	}
	setSTOMPConsumerBackoff(cons, DefaultBackoff())
	defer cons.Close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := cons.Consume(ctx, "t", func(Delivery) {}); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	dials := srv.accepted.Load()
	bound := maxDials(DefaultBackoff(), elapsed, 1, false)
	t.Logf("%d subscriptions in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
	if dials > int64(bound) {
		t.Errorf("%d subscriptions in %v, want at most %d under the backoff", dials, elapsed.Round(time.Millisecond), bound)
	}
	if n := len(logs.Lines()); n > 2 {
		t.Errorf("%d warning lines in %v, want at most 2: %v", n, elapsed.Round(time.Millisecond), logs.Counts())
	}
}

// TestNSQProbeOnce: nsqd's size limit is probed once per host, not once per connection made, and
// again after a dial failed (nsqd may be back with another limit).
func TestNSQProbeOnce(t *testing.T) {
	var probes atomic.Int64
	var refuse atomic.Bool
	serve := nsqHandshakeThen(func(r *bufio.Reader, c net.Conn) { nsqServe(r, c, &probes) })
	srv := startFlapServer(t, func(c net.Conn) {
		if !refuse.Load() {
			serve(c)
		}
	}, nil)
	c := DefaultNSQConfig()
	c.Hosts = []string{srv.addr()}
	p, err := NewNSQ(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	setPoolBackoff(p.pool, Backoff{Base: time.Millisecond, Max: time.Millisecond, Healthy: time.Hour, Churn: 0})
	publish := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return p.Publish(ctx, 0, "t", []byte("m"))
	}
	dropConns := func() {
		srv.mu.Lock()
		for c := range srv.conns {
			c.Close()
		}
		srv.mu.Unlock()
	}
	eventually := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for err := publish(); err != nil; err = publish() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(time.Millisecond) // polling within the deadline
		}
	}
	for i := range 3 { // three connections, one after the other
		eventually(fmt.Sprint("connection ", i))
		dropConns()
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("%d probes for 3 connections, want 1", n)
	}
	refuse.Store(true)
	for deadline := time.Now().Add(5 * time.Second); p.ConnCounts(0).DialFailures == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no dial failed")
		}
		_ = publish()
	}
	refuse.Store(false)
	eventually("after the outage")
	if n := probes.Load(); n != 2 {
		t.Errorf("%d probes after an outage, want 2", n)
	}
}

// TestRMQRouteRedial: a name server that drops every connection is asked for a topic's route under
// the redial policy, not once per publish.
func TestRMQRouteRedial(t *testing.T) {
	ns := startFlapServer(t, func(net.Conn) {}, nil)
	broker := startFlapServer(t, rmqServe(false), nil)
	p := newRMQNativeTo(ns.addr(), broker.addr(), slog.New(slog.DiscardHandler))
	defer p.Close()
	start := time.Now()
	stop := start.Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				if err := p.Publish(ctx, 0, "t", []byte("m")); err == nil {
					t.Error("published without a route")
				}
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	dials := ns.accepted.Load()
	bound := maxDials(testBackoff, elapsed, 1, false)
	t.Logf("%d name server connections in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
	if dials > int64(bound) {
		t.Errorf("%d name server connections in %v, want at most %d under the backoff", dials, elapsed.Round(time.Millisecond), bound)
	}
}

// TestRMQConsumerRedial: a consumer whose name server drops every connection retries its rounds
// under the redial policy, not every 200 ms.
func TestRMQConsumerRedial(t *testing.T) {
	ns := startFlapServer(t, func(net.Conn) {}, nil)
	broker := startFlapServer(t, func(net.Conn) {}, nil)
	c := DefaultRocketMQConfig()
	c.NameServers = []string{ns.addr()}
	r := &RocketMQConsumer{cfg: c, log: slog.New(slog.DiscardHandler), admin: &admin.Client{}, scope: NewConsumeScope(),
		brokers: []admin.Broker{{Name: "broker-a", Addr: broker.addr()}}}
	setRMQConsumerBackoff(r, DefaultBackoff())
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.pullBroker(ctx, 0, r.brokers[0], "t", func(Delivery) {})
	elapsed := time.Since(start)
	dials := ns.accepted.Load() + broker.accepted.Load()
	bound := maxDials(DefaultBackoff(), elapsed, 1, false)
	t.Logf("%d connections in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
	if dials > int64(bound) {
		t.Errorf("%d connections in %v, want at most %d under the backoff", dials, elapsed.Round(time.Millisecond), bound)
	}
}

// TestPingBounded: health checks (/readyz pings every host per request) make at most one connection
// per host and pingReuse, however many run, and the pool's own dials stay under the backoff.
func TestPingBounded(t *testing.T) {
	type pinger interface {
		Ping(ctx context.Context, host int) error
		Close() error
	}
	cases := []struct {
		name  string
		serve func(net.Conn)
		pub   func(t *testing.T, addr string) pinger
		pool  bool // Ping may dial a pool connection too (NSQ: with its size probe)
	}{
		{"nsq", nsqHandshakeThen(closeAtOnce), func(t *testing.T, addr string) pinger {
			c := DefaultNSQConfig()
			c.Hosts = []string{addr}
			p, err := NewNSQ(c, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, true},
		{"stomp", stompHandshakeThen(closeAtOnce), func(t *testing.T, addr string) pinger {
			return newTestSTOMP(t, nil, addr)
		}, false},
		{"rocketmq native", rmqServe(false), func(t *testing.T, addr string) pinger {
			return newRMQNativeTo("127.0.0.1:1", addr, slog.New(slog.DiscardHandler))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFlapServer(t, tc.serve, nil)
			p := tc.pub(t, srv.addr())
			defer p.Close()
			start := time.Now()
			stop := start.Add(500 * time.Millisecond)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for time.Now().Before(stop) {
						ctx, cancel := context.WithTimeout(context.Background(), time.Second)
						_ = p.Ping(ctx, 0)
						cancel()
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			bound := int(elapsed/pingReuseForTest()) + 2
			if tc.pool {
				bound += maxDials(DefaultBackoff(), elapsed, 1, false) + 1
			}
			dials := srv.accepted.Load()
			t.Logf("%d connections in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
			if dials > int64(bound) {
				t.Errorf("%d connections in %v of pings, want at most %d", dials, elapsed.Round(time.Millisecond), bound)
			}
		})
	}
}
