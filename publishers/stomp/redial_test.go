package stomp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/logtest"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

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

// TestRedialBounded: publishertest.RunRedialBounded against STOMP's pool.
func TestRedialBounded(t *testing.T) {
	const slots = 2
	pub := func(t *testing.T, addr string, log *slog.Logger) publishertest.Redialer {
		c := DefaultConfig()
		c.Hosts, c.ConnectionsPerHost = []string{addr}, slots
		p, err := New(c, log)
		if err != nil {
			t.Fatal(err)
		}
		p.pool.Backoff = publishertest.ShortBackoff
		return p
	}
	publishertest.RunRedialBounded(t, []publishertest.RedialCase{
		{Name: "closes after CONNECTED", Pub: pub, Serve: stompHandshakeThen(publishertest.CloseAtOnce), Good: stompHandshakeThen(stompServeReceipts(false)), Slots: slots, Answered: false, Probes: 0},
		{Name: "answers one receipt and closes", Pub: pub, Serve: stompHandshakeThen(stompServeReceipts(true)), Good: stompHandshakeThen(stompServeReceipts(false)), Slots: slots, Answered: true, Probes: 0},
		{Name: "refuses", Pub: pub, Serve: nil, Good: nil, Slots: slots, Answered: false, Probes: 0},
	})
}

// TestPingBounded: publishertest.RunPingBounded against STOMP.
func TestPingBounded(t *testing.T) {
	publishertest.RunPingBounded(t, []publishertest.PingCase{
		{Name: "stomp", Serve: stompHandshakeThen(publishertest.CloseAtOnce), Pub: func(t *testing.T, addr string) publishertest.Pinger {
			return newTestSTOMP(t, nil, addr)
		}, Pool: false},
	})
}

// TestSTOMPConsumerRedial: a broker that drops every subscription at once is redialled under the
// backoff, not every 100 ms forever, and the consumer logs a few lines.
func TestSTOMPConsumerRedial(t *testing.T) {
	srv := publishertest.StartFlapServer(t, stompHandshakeThen(func(r *bufio.Reader, _ net.Conn) { _, _ = r.ReadString(0) }), nil)
	log, logs := logtest.Logger()
	c := DefaultConfig()
	c.Hosts = []string{srv.Addr()}
	cons, err := NewConsumer(c, log)
	if err != nil {
		t.Fatal(err)
	}
	cons.backoff = publishers.DefaultBackoff()
	defer cons.Close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := cons.Consume(ctx, "t", func(publishers.Delivery) {}); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	dials := srv.Accepted.Load()
	bound := publishertest.MaxDials(publishers.DefaultBackoff(), elapsed, 1, false)
	t.Logf("%d subscriptions in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
	if dials > int64(bound) {
		t.Errorf("%d subscriptions in %v, want at most %d under the backoff", dials, elapsed.Round(time.Millisecond), bound)
	}
	if n := len(logs.Lines()); n > 2 {
		t.Errorf("%d warning lines in %v, want at most 2: %v", n, elapsed.Round(time.Millisecond), logs.Counts())
	}
}

// TestCloseDuringHandshake: a broker that accepts and never answers CONNECT holds no Close (nor a
// cancelled Consume) for dial_timeout: the end of the dial's context interrupts the exchange, as it
// does the TCP and TLS steps before it.
func TestCloseDuringHandshake(t *testing.T) {
	const dialTimeout, within = 5 * time.Second, time.Second
	t.Run("publisher Close", func(t *testing.T) {
		p := newTestSTOMP(t, func(c *Config) { c.DialTimeout = dialTimeout }, publishertest.SilentServer(t))
		if err := p.Publish(ctxFor(t, 100*time.Millisecond), 0, "t", []byte("x")); !errors.Is(err, publishers.ErrTimeout) {
			t.Fatalf("publish to a broker that never answers CONNECT: %v, want a timeout", err)
		}
		start := time.Now()
		p.Close()
		if d := time.Since(start); d > within {
			t.Errorf("Close took %v with a CONNECT unanswered, want under %v (dial_timeout %v)", d, within, dialTimeout)
		}
	})
	// The consumer's cases: Consume is ended once the server accepted its subscribe'th connection, which
	// never answers (the ones before answer CONNECTED, take the SUBSCRIBE and close: a resubscription).
	silentAfter := func(subscribe int64) func(net.Conn) {
		var n atomic.Int64
		return func(c net.Conn) {
			if n.Add(1) < subscribe {
				stompHandshakeThen(func(r *bufio.Reader, _ net.Conn) { _, _ = r.ReadString(0) })(c) // SUBSCRIBE, then closed
				return
			}
			_, _ = io.Copy(io.Discard, c) // never answers
		}
	}
	for _, tc := range []struct {
		name      string
		subscribe int64 // the connection the consumer is on when it is ended
		end       func(cons *Consumer, cancel context.CancelFunc)
	}{
		{"consumer Close while subscribing", 1, func(cons *Consumer, _ context.CancelFunc) { cons.Close() }},
		{"Consume cancelled while subscribing", 1, func(_ *Consumer, cancel context.CancelFunc) { cancel() }},
		{"consumer Close while resubscribing", 2, func(cons *Consumer, _ context.CancelFunc) { cons.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := publishertest.StartFlapServer(t, silentAfter(tc.subscribe), nil)
			c := DefaultConfig()
			c.Hosts, c.DialTimeout = []string{srv.Addr()}, dialTimeout
			cons, err := NewConsumer(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			cons.backoff = publishertest.ShortBackoff
			t.Cleanup(func() { _ = cons.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			consumed := make(chan error, 1)
			go func() { consumed <- cons.Consume(ctx, "t", func(publishers.Delivery) {}) }()
			testwait.For(t, 5*time.Second, "the consumer's CONNECT to the silent connection", func() bool {
				return srv.Accepted.Load() >= tc.subscribe
			})
			start := time.Now()
			tc.end(cons, cancel)
			select {
			case err := <-consumed:
				if err != nil {
					t.Errorf("Consume: %v, want nil (ended, not failed)", err)
				}
			case <-time.After(dialTimeout):
				t.Fatalf("Consume still running %v after it was ended", dialTimeout)
			}
			if d := time.Since(start); d > within {
				t.Errorf("Consume ended %v after it was told, with a CONNECT unanswered; want under %v (dial_timeout %v)", d, within, dialTimeout)
			}
		})
	}
}
