package nats_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// honest answers every publish with its PubAck (streams named after their subjects).
func honest(subject string, seq int, reply string) (string, string, bool) {
	return reply, pubAck(subject, seq, ""), true
}

// publishWithin publishes body with a deadline of d and returns how long it took.
func publishWithin(p *nats.Publisher, topic string, body []byte, d time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := p.Publish(ctx, 0, topic, body)
	return time.Since(start), err
}

// frozenFull makes a publisher through a proxy, publishes once, freezes the proxy and fills the
// sockets with large publishes (each with a 1 s deadline) until nats.go's flusher blocks in its write,
// holding the connection's lock (up to its 5 s flusherTimeout). It returns the publisher and a wait for
// those publishes, which returns the longest any of them took.
func frozenFull(t *testing.T) (*nats.Publisher, func() time.Duration) {
	f := startFake(t, "", honest)
	px := publishertest.StartStallProxy(t, f.addr(), 0)
	p := open(t, []string{px.Addr()}, nil)
	if _, err := publishWithin(p, "frozen", []byte("warm"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	px.Stall(true)
	t.Cleanup(func() { px.Stall(false) })
	body := make([]byte, 512<<10)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		worst time.Duration
	)
	for range 40 {
		wg.Go(func() {
			took, _ := publishWithin(p, "frozen", body, time.Second)
			mu.Lock()
			worst = max(worst, took)
			mu.Unlock()
		})
		time.Sleep(5 * time.Millisecond) // one after the other, as a load's requests come
	}
	return p, func() time.Duration { wg.Wait(); return worst }
}

// TestPublishLeavesAtItsDeadline: a publish returns at its own deadline while nats.go's connection lock
// is held across network I/O, or while another topic's stream look-up is under way. Before the writer
// (writer.go) and the publisher-owned look-ups, a 1 s publish waited up to 5 s for a frozen server's
// full socket, a 300 ms one up to twice dial_timeout for a redial, and one up to the first look-up's
// deadline for a named stream's subjects lock.
func TestPublishLeavesAtItsDeadline(t *testing.T) {
	const margin = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) (deadline, worst time.Duration)
	}{
		{"writing to a frozen server's full socket", func(t *testing.T) (time.Duration, time.Duration) {
			_, wait := frozenFull(t)
			return time.Second, wait()
		}},
		{"while nats.go redials a server that does not answer", func(t *testing.T) (time.Duration, time.Duration) {
			f := startFake(t, "", honest)
			px := publishertest.StartStallProxy(t, f.addr(), 0)
			p := open(t, []string{px.Addr()}, func(c *nats.Config) { c.DialTimeout = 3 * time.Second })
			if _, err := publishWithin(p, "redial", []byte("warm"), 2*time.Second); err != nil {
				t.Fatal(err)
			}
			px.Stall(true)
			t.Cleanup(func() { px.Stall(false) })
			px.Cut()
			var worst time.Duration
			for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
				took, _ := publishWithin(p, "redial", []byte("x"), 300*time.Millisecond)
				worst = max(worst, took)
			}
			return 300 * time.Millisecond, worst
		}},
		{"behind another topic's look-up of the named stream", func(t *testing.T) (time.Duration, time.Duration) {
			f := startFake(t, "fake.>", func(_ string, seq int, reply string) (string, string, bool) {
				return reply, `{"stream":"S","seq":` + strconv.Itoa(seq) + `}`, true
			})
			px := publishertest.StartStallProxy(t, f.addr(), 0)
			p := open(t, []string{px.Addr()}, func(c *nats.Config) { c.Stream = "S" })
			px.Stall(true)
			t.Cleanup(func() { px.Stall(false) })
			first := make(chan struct{})
			go func() {
				defer close(first)
				_, _ = publishWithin(p, "fake.a", []byte("a"), 4*time.Second)
			}()
			time.Sleep(100 * time.Millisecond) // the first look-up holds the subjects lock
			worst, _ := publishWithin(p, "fake.b", []byte("b"), 300*time.Millisecond)
			px.Stall(false)
			<-first
			return 300 * time.Millisecond, worst
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deadline, worst := tc.run(t)
			if worst > deadline+margin {
				t.Errorf("a publish with a %v deadline returned after %v", deadline, worst)
			}
		})
	}
}

// TestLookUpOutlivesItsFirstCaller: a publish that joins another's stream look-up is not failed with
// that caller's deadline when it leaves, and the look-up completes for it.
func TestLookUpOutlivesItsFirstCaller(t *testing.T) {
	f := startFake(t, "", honest)
	px := publishertest.StartStallProxy(t, f.addr(), 0)
	p := open(t, []string{px.Addr()}, nil)
	px.Stall(true)
	thaw := time.AfterFunc(600*time.Millisecond, func() { px.Stall(false) })
	t.Cleanup(func() { thaw.Stop(); px.Stall(false) })
	first := make(chan error, 1)
	go func() {
		_, err := publishWithin(p, "joined", []byte("a"), 300*time.Millisecond)
		first <- err
	}()
	time.Sleep(50 * time.Millisecond) // the first publish started the look-up
	took, err := publishWithin(p, "joined", []byte("b"), 5*time.Second)
	if err != nil {
		t.Errorf("the 5 s publish that joined a 300 ms one's look-up: %v after %v, want success once the server answers (600 ms)", err, took)
	}
	if err := <-first; err == nil {
		t.Error("the 300 ms publish succeeded while the server was frozen")
	}
}

// TestFlappingServerBacksOff: a server that drops each connection right after its handshake is
// redialled with the shared backoff (a connection lost before it proved itself is a failure), not
// every 100–200 ms as nats.go does when it counts attempts afresh after each connection it made.
func TestFlappingServerBacksOff(t *testing.T) {
	f := startFake(t, "", nil, func(f *fakeServer) { f.closeAfterPong = true })
	open(t, []string{f.addr()}, nil)
	time.Sleep(3 * time.Second) // a count of connections over a span of time: nothing to poll for
	f.mu.Lock()
	n := len(f.conns)
	f.mu.Unlock()
	// 100-200 ms apart, 3 s make 15-30; doubling from 200-400 ms to 1-2 s make 5-7.
	if n > 10 {
		t.Errorf("%d connections in 3 s to a server that drops each at once, want at most 10", n)
	}
}

// TestConcurrentClose: a second Close while the first is under way returns only when the first has
// finished (the first here waits for nats.go's write to a frozen server's full socket).
func TestConcurrentClose(t *testing.T) {
	p, wait := frozenFull(t)
	defer wait()
	firstDone := make(chan time.Time, 1)
	go func() { _ = p.Close(); firstDone <- time.Now() }()
	time.Sleep(50 * time.Millisecond) // the first Close is under way
	_ = p.Close()
	second := time.Now()
	if first := <-firstDone; first.Sub(second) > 100*time.Millisecond {
		t.Errorf("the second Close returned %v before the first", first.Sub(second))
	}
}

// TestAsyncPublishDoesNotWaitForLookUp: the first async publishes to a topic return at once while its
// stream's look-up waits for a frozen server (/sendAsync answers at once), and are published once it
// answers; at Close, those still waiting get ErrClosed, once each.
func TestAsyncPublishDoesNotWaitForLookUp(t *testing.T) {
	for _, thaw := range []bool{true, false} {
		name := map[bool]string{true: "published after the thaw", false: "closed while waiting"}[thaw]
		t.Run(name, func(t *testing.T) {
			f := startFake(t, "", honest)
			px := publishertest.StartStallProxy(t, f.addr(), 0)
			p := open(t, []string{px.Addr()}, nil)
			px.Stall(true)
			t.Cleanup(func() { px.Stall(false) })
			const n = 3
			dones := make(chan error, 2*n)
			for i := range n {
				start := time.Now()
				if err := p.PublishAsync(0, "fresh", []byte("async"), func(err error) { dones <- err }); err != nil {
					t.Fatalf("async publish %d: %v", i, err)
				}
				if took := time.Since(start); took > 100*time.Millisecond {
					t.Fatalf("async publish %d returned after %v: it waited for the stream's look-up", i, took)
				}
			}
			want := error(nil)
			if thaw {
				time.Sleep(200 * time.Millisecond) // frozen for a while: nothing to poll for
				px.Stall(false)
			} else {
				closed := make(chan struct{})
				go func() { _ = p.Close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(5 * time.Second):
					t.Fatal("Close did not return within 5 s")
				}
				want = publishers.ErrClosed
			}
			for i, err := range testwait.Receive(t, 10*time.Second, "the dones", dones, n) {
				if !errors.Is(err, want) || (want == nil && err != nil) {
					t.Errorf("done %d: %v, want %v", i, err, want)
				}
			}
			if thaw {
				if got := f.storedCount(); got != n {
					t.Errorf("the server stored %d messages, want %d", got, n)
				}
			} else if len(dones) != 0 {
				t.Errorf("%d dones more than once", len(dones))
			}
		})
	}
}
