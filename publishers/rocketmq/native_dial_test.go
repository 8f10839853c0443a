package rocketmq

import (
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

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// slowTLSFront is a TLS listener in front of the broker at to that waits delay after each accept
// before its handshake: a broker whose connections take that long to make (a cold JVM's first TLS
// handshake). It returns its address, a client TLS config that trusts it, and its accept count.
func slowTLSFront(t *testing.T, to string, delay time.Duration) (string, *tls.Config, *atomic.Int32) {
	t.Helper()
	cert, caFile := publishertest.SelfSigned(t)
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		accepted atomic.Int32
		wg       sync.WaitGroup
		mu       sync.Mutex
		open     []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		open = append(open, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			track(c)
			wg.Go(func() {
				time.Sleep(delay)
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
				if tc.Handshake() != nil {
					return
				}
				b, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				track(b)
				wg.Go(func() { _, _ = io.Copy(b, tc); b.Close() })
				_, _ = io.Copy(tc, b)
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), &tls.Config{RootCAs: roots}, &accepted
}

// TestRMQNativeSlowDialOutlivesItsCaller: a publish ends at its own deadline even while another
// publish's dial to the same broker is slow, and that dial is the slot's, bounded by rmqDialTimeout,
// not by the caller who started it: a handshake slower than every caller's deadline still connects
// the broker for the callers after it, with one connection, not one per caller.
func TestRMQNativeSlowDialOutlivesItsCaller(t *testing.T) {
	const handshake = 300 * time.Millisecond
	setup := func(t *testing.T) (*Native, *atomic.Int32) {
		f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte { return rmqTestResponse(0, q.opaque, "", false) })
		front, tc, accepted := slowTLSFront(t, f.ln.Addr().String(), handshake)
		p := newTestRMQNative(t, f, 5*time.Second, "t")
		p.admin.TLS = tc
		p.brokers[0].Addr = front
		return p, accepted
	}
	short := func(p *Native) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := p.Publish(ctx, 0, "t", []byte("m"))
		return time.Since(start), err
	}

	t.Run("a short caller behind a long caller's dial", func(t *testing.T) {
		p, accepted := setup(t)
		first := make(chan error, 1)
		go func() { first <- p.Publish(context.Background(), 0, "t", []byte("m")) }()
		for accepted.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		if took, err := short(p); !errors.Is(err, publishers.ErrTimeout) || took > 200*time.Millisecond {
			t.Errorf("a 50 ms publish: %v after %v, want a timeout at its own deadline", err, took)
		}
		if err := <-first; err != nil {
			t.Errorf("the publish that waits long enough: %v", err)
		}
	})
	t.Run("every caller shorter than the handshake", func(t *testing.T) {
		p, accepted := setup(t)
		deadline := time.Now().Add(5 * time.Second)
		for {
			took, err := short(p)
			if err == nil {
				break
			}
			if !errors.Is(err, publishers.ErrTimeout) || took > 200*time.Millisecond {
				t.Fatalf("a 50 ms publish while the broker is dialled: %v after %v, want a timeout at its own deadline", err, took)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no 50 ms publish succeeded within 5 s: a %v handshake never finishes for them (%d connections)", handshake, accepted.Load())
			}
		}
		if n := accepted.Load(); n != 1 {
			t.Errorf("%d connections, want 1: a caller that leaves neither abandons the dial nor starts another", n)
		}
	})
}
