package nats_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// embedded starts n in-process servers for the test.
func embedded(t testing.TB, n int) *nats.Embedded {
	t.Helper()
	e, err := nats.StartEmbedded(n, nats.EmbeddedOptions{MaxStore: 64 << 20}, publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func open(t testing.TB, addrs []string, edit func(*nats.Config)) *nats.Publisher {
	t.Helper()
	c := nats.DefaultConfig()
	c.Servers = addrs
	if edit != nil {
		edit(&c)
	}
	p, err := nats.New(c, publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// streamMsgs is what server i's stream holds, by its own account (JetStream's stream state).
func streamMsgs(t testing.TB, e *nats.Embedded, i int, stream string) uint64 {
	t.Helper()
	return countStream(t, e.Addrs()[i], stream)
}

// countStream asks the server at addr for stream's message count (JetStream stream info); 0 when
// there is no such stream.
func countStream(t testing.TB, addr, stream string) uint64 {
	t.Helper()
	nc, err := natsgo.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return stored(t, nc, stream)
}

// stored is what stream holds (0: no such stream), asked on nc.
func stored(t testing.TB, nc *natsgo.Conn, stream string) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx(t), stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestLedger: what Publish, PublishBatch and PublishAsync acknowledge is what each server's stream
// holds, and host k's messages land on server k only.
func TestLedger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
	}{
		{"stream per topic", ""},
		{"one named stream", "MQTARGET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := embedded(t, 2)
			p := open(t, e.Addrs(), func(c *nats.Config) { c.Stream = tc.stream })
			topic := "ledger.t1"
			stream := tc.stream
			if stream == "" {
				stream = nats.StreamName(topic)
			}
			want := []uint64{0, 0}
			for host := range 2 {
				for i := range 3 + host {
					if err := p.Publish(ctx(t), host, topic, fmt.Appendf(nil, "one %d %d", host, i)); err != nil {
						t.Fatal(err)
					}
					want[host]++
				}
				if err := p.PublishBatch(ctx(t), host, topic, [][]byte{[]byte("b1"), []byte("b2"), []byte("b3")}); err != nil {
					t.Fatal(err)
				}
				want[host] += 3
				var wg sync.WaitGroup
				var mu sync.Mutex
				var errs []error
				for i := range 10 {
					wg.Add(1)
					if err := p.PublishAsync(host, topic, fmt.Appendf(nil, "async %d", i), func(err error) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						wg.Done()
					}); err != nil {
						t.Fatal(err)
					}
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				want[host] += 10
			}
			for host := range 2 {
				if got := streamMsgs(t, e, host, stream); got != want[host] {
					t.Errorf("server %d holds %d messages in %s, %d were acknowledged", host, got, stream, want[host])
				}
				if v := p.BrokerVersion(host); v != e.Version() {
					t.Errorf("BrokerVersion(%d) = %q, want %q", host, v, e.Version())
				}
				testwait.For(t, 5*time.Second, "one connection counted", func() bool { // counted by nats.go's callbacks
					c := p.ConnCounts(host)
					return c.Opened == 1 && c.Reopened == 0
				})
			}
		})
	}
}

// TestNoDeadline: a publish or ping whose context has no deadline works (nats.go refuses a flush
// without one; core NATS answers after a flush), in both modes.
func TestNoDeadline(t *testing.T) {
	e := embedded(t, 1)
	for _, js := range []bool{true, false} {
		t.Run(fmt.Sprintf("jetstream %v", js), func(t *testing.T) {
			p := open(t, e.Addrs(), func(c *nats.Config) { c.JetStream = js })
			if err := p.Publish(context.Background(), 0, "nodeadline", []byte("x")); err != nil {
				t.Errorf("Publish: %v", err)
			}
			if err := p.PublishBatch(context.Background(), 0, "nodeadline", [][]byte{[]byte("a"), []byte("b")}); err != nil {
				t.Errorf("PublishBatch: %v", err)
			}
			if err := p.Ping(context.Background(), 0); err != nil {
				t.Errorf("Ping: %v", err)
			}
		})
	}
}
