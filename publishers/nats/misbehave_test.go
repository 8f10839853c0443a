package nats_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

func pubAck(subject string, seq int, extra string) string {
	return fmt.Sprintf(`{"stream":%q,"seq":%d%s}`, nats.StreamName(subject), seq, extra)
}

// TestMisbehavingServer: against a fake server answering publishes wrongly, nothing it did not store is
// acknowledged, a wrong answer is a protocol error (unavailable: it says nothing about what was
// stored), and a JetStream error answer is a rejection.
func TestMisbehavingServer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   fakeAnswer
		want     error // the kind of every publish's error; nil: success
		protocol bool  // counted as protocol errors
	}{
		{"honest", func(s string, n int, r string) (string, string, bool) { return r, pubAck(s, n, ""), true }, nil, false},
		{"PubAck of another stream", func(_ string, n int, r string) (string, string, bool) {
			return r, fmt.Sprintf(`{"stream":"OTHER","seq":%d}`, n), false
		}, publishers.ErrUnavailable, true},
		{"not JSON", func(string, int, string) (string, string, bool) { return "", "", false }, nil, false}, // replaced below
		{"PubAck without a sequence", func(s string, _ int, r string) (string, string, bool) { return r, pubAck(s, 0, ""), false }, publishers.ErrUnavailable, true},
		{"duplicate without a message id", func(s string, n int, r string) (string, string, bool) {
			return r, pubAck(s, n, `,"duplicate":true`), false
		}, publishers.ErrUnavailable, true},
		{"answer to a token never issued", func(s string, n int, r string) (string, string, bool) {
			return guessed(r, 1000), pubAck(s, n, ""), false
		}, publishers.ErrUnavailable, true},

		{"JetStream error", func(_ string, _ int, r string) (string, string, bool) {
			return r, `{"error":{"code":503,"err_code":10023,"description":"insufficient resources"}}`, false
		}, publishers.ErrRejected, false},
		{"no answer", func(string, int, string) (string, string, bool) { return "", "", true }, publishers.ErrTimeout, false},
	} {
		if tc.name == "not JSON" {
			tc.answer = func(_ string, _ int, r string) (string, string, bool) { return r, "garbage", false }
			tc.want, tc.protocol = publishers.ErrUnavailable, true
		}
		t.Run(tc.name, func(t *testing.T) {
			topic := "fake.topic"
			f := startFake(t, topic, tc.answer)
			p := open(t, []string{f.addr()}, nil)
			acked := 0
			for range 3 {
				c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				err := p.Publish(c, 0, topic, []byte("x"))
				cancel()
				if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
					t.Fatalf("Publish: %v, want %v", err, tc.want)
				}
				if err == nil {
					acked++
				}
			}
			if tc.want != publishers.ErrTimeout { // async waits asyncMaxWait for what is never answered
				var wg sync.WaitGroup
				var mu sync.Mutex
				for range 5 {
					wg.Add(1)
					err := p.PublishAsync(0, topic, []byte("y"), func(err error) {
						defer wg.Done()
						if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
							t.Errorf("PublishAsync's done: %v, want %v", err, tc.want)
						}
						if err == nil {
							mu.Lock()
							acked++
							mu.Unlock()
						}
					})
					if err != nil { // refused: the connection a violation closed is being redialled
						wg.Done()
						if tc.want == nil || !errors.Is(err, publishers.ErrUnavailable) {
							t.Errorf("PublishAsync: %v", err)
						}
					}
				}
				wg.Wait()
			}
			if stored := f.storedCount(); acked > stored {
				t.Errorf("%d acknowledged, the fake stored %d", acked, stored)
			}
			if got := p.ProtocolErrors(0) > 0; got != tc.protocol {
				t.Errorf("protocol errors counted: %d, want some: %v", p.ProtocolErrors(0), tc.protocol)
			}
		})
	}
}

// TestServerKilled: a server that goes away fails its host's publishes as unavailable at once (nothing
// buffered for later), leaves the other host alone, and once a server is back on the address the
// publisher reconnects and re-creates the stream the new server lacks.
func TestServerKilled(t *testing.T) {
	e := embedded(t, 2)
	addr := e.Addrs()[0]
	p := open(t, e.Addrs(), nil)
	topic := "killed"
	for host := range 2 {
		if err := p.Publish(ctx(t), host, topic, []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	e.Server(0).Shutdown()
	e.Server(0).WaitForShutdown()
	testwait.Until(t, 5*time.Second, "host 0 unavailable", func() error {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := p.Publish(c, 0, topic, []byte("during")); !errors.Is(err, publishers.ErrUnavailable) {
			return fmt.Errorf("Publish: %v, want unavailable", err)
		}
		return nil
	})
	done := make(chan error, 1)
	if err := p.PublishAsync(0, topic, []byte("async during"), func(err error) { done <- err }); err == nil {
		if err := <-done; !errors.Is(err, publishers.ErrUnavailable) {
			t.Errorf("PublishAsync during the outage: done(%v), want unavailable", err)
		}
	} else if !errors.Is(err, publishers.ErrUnavailable) {
		t.Errorf("PublishAsync during the outage: %v, want unavailable", err)
	}
	if err := p.Publish(ctx(t), 1, topic, []byte("other host")); err != nil {
		t.Errorf("host 1 during host 0's outage: %v", err)
	}
	// A new, empty server on the same address.
	_, port, _ := strings.Cut(addr, ":") // the embedded servers listen on 127.0.0.1, as startServer does
	portN, _ := strconv.Atoi(port)
	startServer(t, server.Options{Port: portN})
	testwait.Until(t, 10*time.Second, "host 0 back", func() error { return p.Publish(ctx(t), 0, topic, []byte("after")) })
	if got := countStream(t, addr, nats.StreamName(topic)); got != 1 {
		t.Errorf("the new server holds %d messages, 1 was acknowledged since it started", got)
	}
	testwait.For(t, 5*time.Second, "one reconnect counted", func() bool { return p.ConnCounts(0).Reopened == 1 })
}

// TestServerFrozen: a server that stops answering (behind a stalled proxy) ends sync publishes by their
// deadline and async ones within asyncMaxWait, and the publisher works again once it answers.
func TestServerFrozen(t *testing.T) {
	e := embedded(t, 1)
	px := publishertest.StartStallProxy(t, e.Addrs()[0], 0)
	p := open(t, []string{px.Addr()}, nil)
	topic := "frozen"
	if err := p.Publish(ctx(t), 0, topic, []byte("before")); err != nil {
		t.Fatal(err)
	}
	px.Stall(true)
	start := time.Now()
	c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := p.Publish(c, 0, topic, []byte("frozen sync"))
	cancel()
	if !errors.Is(err, publishers.ErrTimeout) || time.Since(start) > 2*time.Second {
		t.Errorf("Publish to a frozen server: %v after %v, want a timeout by its 500ms deadline", err, time.Since(start))
	}
	done := make(chan error, 1)
	start = time.Now()
	if err := p.PublishAsync(0, topic, []byte("frozen async"), func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, publishers.ErrTimeout) && !errors.Is(err, publishers.ErrUnavailable) {
			t.Errorf("PublishAsync to a frozen server: done(%v)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PublishAsync's done did not run within 10s")
	}
	px.Stall(false)
	testwait.Until(t, 15*time.Second, "publishing again after the thaw", func() error {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return p.Publish(c, 0, topic, []byte("after"))
	})
	t.Logf("async done after %v", time.Since(start))
}

// guessed is the reply subject a server would guess for the publish k after the one whose reply
// subject is r: the token counted on, the nonce kept (it cannot know the next one).
func guessed(r string, k int) string {
	i := strings.LastIndexByte(r, '.')
	tok, nonce, _ := strings.Cut(r[i+1:], "_")
	n, _ := strconv.Atoi(tok)
	return r[:i+1] + strconv.Itoa(n+k) + "_" + nonce
}

// TestStrayThenDrop: a server that answers a publish, sends the answer it guesses for the next one
// before getting it, and then drops that next publish (stores and answers nothing): with publishes in
// flight the next token is issued already, and only the reply subject's nonce tells the guess from an
// answer. Nothing dropped may be acknowledged.
func TestStrayThenDrop(t *testing.T) {
	topic := "fake.ahead"
	f := startFake(t, topic, func(s string, n int, r string) (string, string, bool) {
		if n%2 == 0 {
			return "", "", false // dropped
		}
		return r, "AHEAD:" + guessed(r, 1) + " " + pubAck(s, n+1, "") + "\n" + pubAck(s, n, ""), true
	})
	p := open(t, []string{f.addr()}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for range 40 {
		wg.Add(1)
		if err := p.PublishAsync(0, topic, []byte("z"), func(err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked++
				mu.Unlock()
			} else if !errors.Is(err, publishers.ErrTimeout) && !errors.Is(err, publishers.ErrUnavailable) {
				t.Errorf("done: %v", err)
			}
		}); err != nil { // refused while the connection a violation closed is redialled
			wg.Done()
			if !errors.Is(err, publishers.ErrUnavailable) {
				t.Errorf("PublishAsync: %v", err)
			}
		}
	}
	wg.Wait()
	if stored := f.storedCount(); acked > stored {
		t.Errorf("%d acknowledged, the fake stored %d", acked, stored)
	}
	if p.ProtocolErrors(0) == 0 {
		t.Error("no protocol error counted for the guessed answers")
	}
	t.Logf("%d acknowledged, %d stored, %d protocol errors", acked, f.storedCount(), p.ProtocolErrors(0))
}

// TestNothingListening: a server down when the publisher starts does not fail New; its publishes fail
// as unavailable at once (no waiting for a deadline), dial failures are counted, and the publisher
// connects once a server listens there.
func TestNothingListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := open(t, []string{addr}, nil)
	start := time.Now()
	if err := p.Publish(ctx(t), 0, "down", []byte("x")); !errors.Is(err, publishers.ErrUnavailable) || time.Since(start) > time.Second {
		t.Errorf("Publish to nothing: %v after %v, want unavailable at once", err, time.Since(start))
	}
	if err := p.PublishAsync(0, "down", []byte("x"), func(error) { t.Error("done called for a refused PublishAsync") }); !errors.Is(err, publishers.ErrUnavailable) {
		t.Errorf("PublishAsync to nothing: %v, want unavailable", err)
	}
	if c := p.ConnCounts(0); c.DialFailures == 0 || c.Opened != 0 {
		t.Errorf("ConnCounts = %+v, want dial failures and no connection", c)
	}
	_, port, _ := net.SplitHostPort(addr)
	portN, _ := strconv.Atoi(port)
	startServer(t, server.Options{Port: portN})
	testwait.Until(t, 10*time.Second, "connected once the server listens", func() error { return p.Publish(ctx(t), 0, "down", []byte("up")) })
	if got := countStream(t, addr, "down"); got != 1 {
		t.Errorf("the server holds %d, 1 was acknowledged", got)
	}
}

// TestFakes drives the publisher against publishertest's misbehaviours (the fake NATS server): nothing
// the fake did not store is acknowledged, every failure is unavailable or a timeout, and each
// violation is counted.
func TestFakes(t *testing.T) {
	publishertest.RunFakes(t, publishertest.FakeFeatures{}, newFakeNATS, func(t testing.TB, f publishertest.Fake) publishers.Publisher {
		c := nats.DefaultConfig()
		c.Servers = f.Addrs()
		p, err := nats.New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// TestSlowDial: the shared check of a server slow to set connections up (one connection per server).
func TestSlowDial(t *testing.T) {
	f := newFakeNATS(t, publishertest.Honest)
	publishertest.RunSlowDial(t, publishertest.SlowDialCase{Backend: f.Addrs()[0], MaxConns: 1,
		New: func(t *testing.T, addr string, _ *tls.Config) publishers.Publisher {
			c := nats.DefaultConfig()
			c.Servers = []string{addr}
			c.DialTimeout = 2 * time.Second
			p, err := nats.New(c, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			return p
		}})
}
