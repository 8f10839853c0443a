package mqtt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestRecoverAfterKill: the connection to host 0's server is cut (a broker killed and back at once);
// publishes in flight end unavailable or acknowledged, never hang; the host redials and publishing
// works again; host 1 is not touched. What was acknowledged is on the servers, once.
func TestRecoverAfterKill(t *testing.T) {
	for _, v := range []string{"5", version311} {
		t.Run("v"+v, func(t *testing.T) { recoverAfterKill(t, v) })
	}
}

func recoverAfterKill(t *testing.T, version string) {
	e := embeddedFor(t, 2)
	px := publishertest.StartStallProxy(t, e.Addrs()[0], 0)
	rec := newRecorder(t, e.Addrs())
	c := DefaultConfig()
	c.Servers = []string{px.Addr(), e.Addrs()[1]}
	c.Version = version
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	const topic = "recover"
	acked := map[int]int{}
	publish := func(host, i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := p.Publish(ctx, host, topic, fmt.Appendf(nil, "%d-%d", host, i))
		if err == nil {
			acked[host]++
		}
		return err
	}
	for i := range 10 {
		for h := range 2 {
			if err := publish(h, i); err != nil {
				t.Fatalf("before the cut: host %d: %v", h, err)
			}
		}
	}
	px.Cut()
	recovered := false
	deadline := time.Now().Add(10 * time.Second)
	for i := 10; time.Now().Before(deadline); i++ {
		err := publish(0, i)
		if err == nil && p.ConnCounts(0).Reopened > 0 {
			recovered = true
			break
		}
		if err != nil && !errors.Is(err, publishers.ErrUnavailable) {
			t.Fatalf("after the cut: %v, want ErrUnavailable or success", err)
		}
		if err := publish(1, i); err != nil {
			t.Fatalf("host 1 while host 0 is cut: %v", err)
		}
		<-time.After(20 * time.Millisecond) // the host is in its redial backoff
	}
	if !recovered {
		t.Fatalf("host 0 did not recover within 10s: %+v", p.ConnCounts(0))
	}
	for h := range 2 {
		got := rec.Consume(t, h, topic, acked[h], 5*time.Second)
		seen := map[string]bool{}
		for _, b := range got {
			if seen[string(b)] {
				t.Errorf("host %d: %q twice", h, b)
			}
			seen[string(b)] = true
		}
		if len(got) < acked[h] {
			t.Errorf("host %d: %d acknowledged, the server delivered %d", h, acked[h], len(got))
		}
	}
	if c := p.ConnCounts(1); c.Opened != 1 {
		t.Errorf("host 1 ConnCounts %+v: its connection should be untouched", c)
	}
}
