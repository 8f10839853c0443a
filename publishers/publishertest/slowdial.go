package publishertest

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
)

// SlowFront listens on 127.0.0.1 in front of the broker at to and relays each connection only delay
// after accepting it: a broker whose connections take that long to set up (a cold JVM, a TLS handshake
// on a busy machine). The client's TCP connect completes at once; its handshake waits. It returns its
// address and its accept count; everything closes at cleanup.
func SlowFront(t testing.TB, to string, delay time.Duration) (string, *atomic.Int32) {
	t.Helper()
	return slowFront(t, to, delay, func(c net.Conn) (net.Conn, bool) { return c, true })
}

// SlowTLSFront is SlowFront speaking TLS to its clients (and plain TCP to the broker), its handshake
// delayed: for a protocol whose connection set-up is the TCP and TLS handshakes alone. It returns its
// address, a client TLS config that trusts it, and its accept count.
func SlowTLSFront(t testing.TB, to string, delay time.Duration) (string, *tls.Config, *atomic.Int32) {
	t.Helper()
	cert, caFile := SelfSigned(t)
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	addr, accepted := slowFront(t, to, delay, func(c net.Conn) (net.Conn, bool) {
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		return tc, tc.Handshake() == nil
	})
	return addr, &tls.Config{RootCAs: roots}, accepted
}

// slowFront is SlowFront with wrap applied to each accepted connection after the delay (false: drop it).
func slowFront(t testing.TB, to string, delay time.Duration, wrap func(net.Conn) (net.Conn, bool)) (string, *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		accepted atomic.Int32
		wg       sync.WaitGroup
		mu       sync.Mutex
		open     []net.Conn
		closed   bool
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			c.Close()
			return false
		}
		open = append(open, c)
		return true
	}
	wg.Go(func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			if !track(raw) {
				return
			}
			wg.Go(func() {
				time.Sleep(delay)
				c, ok := wrap(raw)
				if !ok {
					raw.Close()
					return
				}
				b, err := net.Dial("tcp", to)
				if err != nil {
					raw.Close()
					return
				}
				if !track(b) {
					return
				}
				wg.Go(func() { _, _ = io.Copy(b, c); b.Close() })
				_, _ = io.Copy(c, b)
				raw.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), &accepted
}

// SlowDialCase is one publisher for RunSlowDial.
type SlowDialCase struct {
	// Backend is the (honest) broker the SlowFront relays to.
	Backend string
	// TLS: the front speaks TLS (SlowTLSFront), for a protocol whose set-up is the TCP and TLS
	// handshakes alone.
	TLS bool
	// New makes a publisher of one host, addr (a SlowFront before Backend; tc trusts it when TLS is
	// set, nil otherwise), whose dial timeout is well above the handshake's delay; the check closes it.
	New func(t *testing.T, addr string, tc *tls.Config) publishers.Publisher
	// Topic, when set, is what every publish goes to (a fake that knows that topic only); otherwise
	// each part of the check uses a fresh one.
	Topic string
	// MaxConns bounds the connections the publisher may make to the host during the check (its
	// connections per host, and a probe of its own).
	MaxConns int
}

// RunSlowDial checks that a publish ends under its own deadline while the broker is slow to set
// connections up, and that the connection is made anyway. Its handshake takes 500 ms (under the
// publishers' 1 s dial timeouts), and:
//   - a 50 ms publish that comes while a 10 s one waits for the first connection leaves at its own
//     deadline (not queued behind the other's dial), and the 10 s one succeeds;
//   - 50 ms publishes one after the other, each leaving at its deadline, get a connection within 5 s,
//     with at most MaxConns connections made: the dial goes on when the publish that started it
//     leaves, rather than being abandoned and started again by each; and so do 50 ms batches, which
//     a client may send on a path of their own;
//   - async publishes made while the first connection is set up return at once (within handOver:
//     /sendAsync answers 202 at once) and are published once it is up.
func RunSlowDial(t *testing.T, c SlowDialCase) {
	const (
		delay = 500 * time.Millisecond
		short = 50 * time.Millisecond
		// late is well past short and short of delay: a publish that took longer waited for a dial.
		late = 400 * time.Millisecond
		// handOver bounds PublishAsync's return: a hand-over, never a wait for the network.
		handOver = 100 * time.Millisecond
	)
	publish := func(p publishers.Publisher, topic string, d time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		err := p.Publish(ctx, 0, topic, []byte("slow dial"))
		return time.Since(start), err
	}
	batch := func(p publishers.Publisher, topic string, d time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		err := p.PublishBatch(ctx, 0, topic, [][]byte{[]byte("slow dial 1"), []byte("slow dial 2")})
		return time.Since(start), err
	}
	open := func(t *testing.T) (publishers.Publisher, *atomic.Int32) {
		var (
			addr     string
			tc       *tls.Config
			accepted *atomic.Int32
		)
		if c.TLS {
			addr, tc, accepted = SlowTLSFront(t, c.Backend, delay)
		} else {
			addr, accepted = SlowFront(t, c.Backend, delay)
		}
		p := c.New(t, addr, tc)
		t.Cleanup(func() {
			if err := closeWithin(p, 30*time.Second); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return p, accepted
	}
	failedFast := func(t *testing.T, i int, took time.Duration, err error) {
		t.Helper()
		if !errors.Is(err, publishers.ErrTimeout) && !errors.Is(err, publishers.ErrUnavailable) {
			t.Fatalf("publish %d of %v: %v, want a timeout or unavailable", i, short, err)
		}
		if took > late {
			t.Fatalf("publish %d of %v: %v after %v: it waited past its deadline", i, short, err, took)
		}
	}

	t.Run("a short publish behind a long one's dial", func(t *testing.T) {
		p, accepted := open(t)
		topic := cmp.Or(c.Topic, freshTopic("slow"))
		first := make(chan error, 1)
		go func() { _, err := publish(p, topic, 10*time.Second); first <- err }()
		for end := time.Now().Add(5 * time.Second); accepted.Load() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the 10 s publish made no connection within 5 s")
			}
		}
		if took, err := publish(p, topic, short); err != nil {
			failedFast(t, 0, took, err)
		}
		if err := <-first; err != nil {
			t.Errorf("the 10 s publish: %v", err)
		}
	})
	t.Run("an async publish while the first connection is set up", func(t *testing.T) {
		p, _ := open(t)
		topic := cmp.Or(c.Topic, freshTopic("slow"))
		const n = 3
		dones := make(chan error, n)
		for i := range n {
			start := time.Now()
			err := p.PublishAsync(0, topic, []byte("slow dial async"), func(err error) { dones <- err })
			if took := time.Since(start); took > handOver {
				t.Fatalf("async publish %d returned after %v: it waited for the connection on its caller's goroutine (/sendAsync answers at once)", i, took)
			}
			if err != nil {
				t.Fatalf("async publish %d: %v, want it taken while the connection is set up", i, err)
			}
		}
		for i, err := range testwait.Receive(t, 10*time.Second, "the async publishes' dones", dones, n) {
			if err != nil {
				t.Errorf("async publish done %d: %v, want it published once connected", i, err)
			}
		}
	})
	for _, v := range []struct {
		name    string
		publish func(p publishers.Publisher, topic string, d time.Duration) (time.Duration, error)
	}{
		{"publish", publish},
		{"batch", batch},
	} {
		t.Run("every "+v.name+" shorter than the handshake", func(t *testing.T) {
			p, accepted := open(t)
			topic := cmp.Or(c.Topic, freshTopic("slow"))
			for i, end := 0, time.Now().Add(5*time.Second); ; i++ {
				took, err := v.publish(p, topic, short)
				if err == nil {
					break
				}
				failedFast(t, i, took, err)
				if time.Now().After(end) {
					t.Fatalf("no %v %s succeeded within 5 s (%d connections made): the %v handshake never completes for them", short, v.name, accepted.Load(), delay)
				}
			}
			if n := int(accepted.Load()); n > c.MaxConns {
				t.Errorf("%d connections made, want at most %d: a %s that leaves abandons the dial and the next starts another", n, c.MaxConns, v.name)
			}
		})
	}
}

// RunSlowDialTarget runs RunSlowDial for tc's publisher in front of its honest fake, with at most
// maxConns connections.
func RunSlowDialTarget(t *testing.T, tc FakeTarget, maxConns int) {
	fake := tc.Fake(t, Honest)
	t.Cleanup(fake.Close)
	RunSlowDial(t, SlowDialCase{Backend: fake.Addrs()[0], MaxConns: maxConns, New: func(t *testing.T, addr string, _ *tls.Config) publishers.Publisher {
		p, err := tc.Open([]string{addr}, Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}})
}
