package amqp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestMain checks that no goroutine outlives the tests. The publishers package links rocketmq-client-go
// (on this tree's main), whose go-cache starts a janitor at package init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}

// logBuf is a logger whose output the test can read.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newTestPublisher(t *testing.T, urls []string, edit func(*Config)) (*Publisher, *logBuf) {
	t.Helper()
	c := DefaultConfig()
	c.URLs = urls
	c.DialTimeout = time.Second
	// The fake broker's scripts speak to one connection per host; TestConnectionsPerHost sets more.
	c.ConnectionsPerHost = 1
	if edit != nil {
		edit(&c)
	}
	lb := &logBuf{}
	p, err := New(c, slog.New(slog.NewTextHandler(lb, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.backoff = publishers.Backoff{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond, Healthy: time.Hour, Churn: 0}
	p.pool.Backoff = p.backoff
	t.Cleanup(func() { _ = p.Close() })
	return p, lb
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// publishAll runs Publish, PublishBatch and PublishAsync once each and returns their errors.
func publishAll(t *testing.T, p *Publisher, d time.Duration) (sync, batch, async error) {
	t.Helper()
	sync = p.Publish(ctxT(t, d), 0, "t", []byte("one"))
	batch = p.PublishBatch(ctxT(t, d), 0, "t", [][]byte{[]byte("two"), []byte("three")})
	ch := make(chan error, 2)
	if err := p.PublishAsync(0, "t", []byte("four"), func(err error) { ch <- err }); err != nil {
		return sync, batch, err
	}
	select {
	case async = <-ch:
	case <-time.After(d + 2*time.Second):
		t.Fatal("PublishAsync's done did not run")
	}
	select {
	case <-ch:
		t.Fatal("PublishAsync's done ran twice")
	case <-time.After(10 * time.Millisecond):
	}
	return sync, batch, async
}

// TestFakeBrokerAnswers: what each publish gets from a broker that answers it one way or another.
// No publisher may say 200 for what the broker did not acknowledge, and every violation of the
// protocol is counted.
func TestFakeBrokerAnswers(t *testing.T) {
	unavailable, rejected := publishers.ErrUnavailable, publishers.ErrRejected
	for _, tc := range []struct {
		name      string
		onPublish func(w *fakeConn, ch uint16, tag uint64, p fakePublish)
		want      [3]error // kinds of Publish's, PublishBatch's and PublishAsync's errors; nil: acknowledged
		protocol  bool     // a protocol violation must have been counted
	}{
		{name: "acks", onPublish: acker},
		{name: "acks multiple", onPublish: func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
			if tag != 2 { // the batch's two (tags 2, 3) in one ack
				w.ack(ch, tag, true)
			}
		}},
		{name: "nacks", onPublish: func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) { w.nack(ch, tag) },
			want: [3]error{rejected, rejected, rejected}},
		{name: "nacks one of the batch", onPublish: func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
			if tag == 3 {
				w.nack(ch, tag)
			} else {
				w.ack(ch, tag, false)
			}
		}, want: [3]error{nil, rejected, nil}},
		{name: "returns then acks (unroutable)", onPublish: func(w *fakeConn, ch uint16, tag uint64, p fakePublish) {
			w.ret(ch, p, p.messageID)
			w.ack(ch, tag, false)
		}, want: [3]error{rejected, rejected, rejected}},
		{name: "acks ahead, multiple", onPublish: func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
			w.ack(ch, tag+100, true) // covers what was published, and 100 tags never sent
		}, want: [3]error{errAny, errAny, errAny}, protocol: true}, // acked, unless the violation closes the connection first
		{name: "acks a publish before it is sent", onPublish: func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
			// Before acking 1 it acks 3, which is not sent yet; it acks 2 once 3 is sent. The
			// library would keep the early ack and replay it in sequence after 2: it must not count.
			// Tag 3 is not even numbered when it comes (the batch of 2 and 3 follows the Publish of
			// 1), so the guard refuses it and every publish fails.
			switch tag {
			case 1:
				w.ack(ch, 3, false)
				w.ack(ch, 1, false)
			case 2:
			case 3:
				w.ack(ch, 2, false)
			default:
				w.ack(ch, tag, false)
			}
		}, want: [3]error{unavailable, unavailable, unavailable}, protocol: true},
		{name: "returns a message it was not sent", onPublish: func(w *fakeConn, ch uint16, tag uint64, p fakePublish) {
			w.ret(ch, p, "999")
			w.ack(ch, tag, false)
		}, want: [3]error{unavailable, unavailable, unavailable}, protocol: true},
		{name: "returns after the ack", onPublish: func(w *fakeConn, ch uint16, tag uint64, p fakePublish) {
			w.ack(ch, tag, false)
			w.ret(ch, p, p.messageID)
		}, want: [3]error{errAny, errAny, errAny}, protocol: true},
		{name: "garbage", onPublish: func(w *fakeConn, _ uint16, _ uint64, _ fakePublish) {
			w.raw([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		}, want: [3]error{unavailable, unavailable, unavailable}, protocol: true},
		{name: "acks on another channel", onPublish: func(w *fakeConn, _ uint16, tag uint64, _ fakePublish) {
			w.ack(9, tag, false)
		}, want: [3]error{unavailable, unavailable, unavailable}},
		{name: "closes the connection", onPublish: func(w *fakeConn, _ uint16, _ uint64, _ fakePublish) {
			w.c.Close()
		}, want: [3]error{unavailable, unavailable, unavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.onPublish)
			p, _ := newTestPublisher(t, []string{f.url()}, nil)
			sync, batch, async := publishAll(t, p, 2*time.Second)
			for i, err := range []error{sync, batch, async} {
				what := [...]string{"Publish", "PublishBatch", "PublishAsync"}[i]
				switch want := tc.want[i]; {
				case want == errAny:
				case want == errSome && err == nil:
					t.Errorf("%s acknowledged", what)
				case want == errSome:
				case want == nil && err != nil:
					t.Errorf("%s: %v, want nil", what, err)
				case want != nil && !errors.Is(err, want):
					t.Errorf("%s: %v, want %v", what, err, want)
				}
			}
			if got := p.ProtocolErrors(0); (got > 0) != tc.protocol {
				t.Errorf("ProtocolErrors = %d, want a count: %v", got, tc.protocol)
			}
			if got := p.BrokerVersion(0); got != "FakeMQ 0.1" {
				t.Errorf("BrokerVersion = %q", got)
			}
		})
	}
}

// errAny: any outcome will do; errSome: any error.
var errAny, errSome = errors.New("any"), errors.New("some error")

// TestPublishProperties: persistent messages with a message id naming the delivery tag, mandatory,
// routing key = topic on the default exchange; non-durable sends transient ones.
func TestPublishProperties(t *testing.T) {
	f := newFake(t, acker)
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	if err := p.PublishBatch(ctxT(t, 2*time.Second), 0, "q1", [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	got := f.publishes()
	if len(got) != 2 || got[0].key != "q1" || got[0].exchange != "" || !got[0].mandatory || got[0].messageID != "1" || got[1].messageID != "2" ||
		string(got[1].body) != "b" {
		t.Fatalf("publishes = %+v", got)
	}
	// A topic AMQP cannot carry (a short string: 255 bytes) is refused and breaks nothing.
	for _, topic := range []string{strings.Repeat("q", 256), "", "a\nb"} {
		if err := p.Publish(ctxT(t, 2*time.Second), 0, topic, []byte("x")); !errors.Is(err, publishers.ErrRejected) {
			t.Fatalf("topic %.10q: %v", topic, err)
		}
	}
	if err := p.Publish(ctxT(t, 2*time.Second), 0, "q1", []byte("c")); err != nil {
		t.Fatal(err)
	}
	if c := p.ConnCounts(0); c.Opened != 1 {
		t.Fatalf("connections: %+v", c)
	}
}

// TestDeadlines: a broker that never confirms, one that never finishes the handshake, and a refused
// port: every call returns by its deadline with the right kind, async done runs once within maxWait,
// and nothing is sent twice.
func TestDeadlines(t *testing.T) {
	t.Run("never confirms", func(t *testing.T) {
		f := newFake(t, func(*fakeConn, uint16, uint64, fakePublish) {})
		p, _ := newTestPublisher(t, []string{f.url()}, nil)
		p.maxWait = 1500 * time.Millisecond
		start := time.Now()
		err := p.Publish(ctxT(t, 300*time.Millisecond), 0, "t", []byte("x"))
		if !errors.Is(err, publishers.ErrTimeout) || time.Since(start) > time.Second {
			t.Fatalf("Publish: %v after %v", err, time.Since(start))
		}
		done := make(chan error, 1)
		if err := p.PublishAsync(0, "t", []byte("y"), func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, publishers.ErrUnavailable) {
				t.Fatalf("async: %v", err)
			}
		case <-time.After(p.maxWait + 2*stallTick + time.Second):
			t.Fatal("async done did not run within maxWait")
		}
		if n := len(f.publishes()); n != 2 {
			t.Fatalf("broker got %d publishes, want 2 (no resend)", n)
		}
	})
	t.Run("silent handshake", func(t *testing.T) {
		f := newFake(t, acker)
		f.silentHandshake = true
		p, _ := newTestPublisher(t, []string{f.url()}, nil)
		start := time.Now()
		err := p.Publish(ctxT(t, 200*time.Millisecond), 0, "t", []byte("x"))
		if !errors.Is(err, publishers.ErrTimeout) || time.Since(start) > 700*time.Millisecond {
			t.Fatalf("Publish: %v after %v", err, time.Since(start))
		}
		err = p.Publish(ctxT(t, 3*time.Second), 0, "t", []byte("x")) // waits for the dial's end: dial_timeout 1s
		if !errors.Is(err, publishers.ErrUnavailable) {
			t.Fatalf("Publish after dial_timeout: %v", err)
		}
		if p.ConnCounts(0).DialFailures == 0 {
			t.Fatal("no dial failure counted")
		}
	})
	t.Run("refused", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		p, lb := newTestPublisher(t, []string{"amqp://u:secretpw@" + addr + "/"}, nil)
		err := p.Publish(ctxT(t, time.Second), 0, "t", []byte("x"))
		if !errors.Is(err, publishers.ErrUnavailable) {
			t.Fatalf("Publish: %v", err)
		}
		if strings.Contains(err.Error(), "secretpw") || strings.Contains(lb.String(), "secretpw") {
			t.Fatalf("password shown: %v / %s", err, lb.String())
		}
		if err := p.Ping(ctxT(t, time.Second), 0); err == nil {
			t.Fatal("Ping of a refused port passed")
		}
	})
}

// TestRefusedLogin: a handshake the broker refuses (403 ACCESS_REFUSED) fails every kind of publish
// as unavailable (503, as a refused connection of every broker does; 502 is a message's own
// refusal), naming the broker's reason and never the password, and nothing is published.
func TestRefusedLogin(t *testing.T) {
	f := newFakeWith(t, fakeOpts{refuseLogin: true}, acker)
	p, lb := newTestPublisher(t, []string{f.url()}, nil)
	syncErr, batchErr, asyncErr := publishAll(t, p, 2*time.Second)
	for name, err := range map[string]error{"Publish": syncErr, "PublishBatch": batchErr, "PublishAsync": asyncErr} {
		if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "403 ACCESS_REFUSED") {
			t.Errorf("%s: %v, want ErrUnavailable with the broker's 403 ACCESS_REFUSED", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%s: the password is shown: %v", name, err)
		}
	}
	if strings.Contains(lb.String(), "secretpw") {
		t.Errorf("the password is logged: %s", lb.String())
	}
	if n := len(f.publishes()); n != 0 {
		t.Errorf("the broker got %d publishes through a refused login", n)
	}
	if err := p.Ping(ctxT(t, 2*time.Second), 0); err == nil {
		t.Error("Ping passed with a refused login")
	}
}

// TestRecovery: after the broker drops every connection (kill -9), what was pending fails as
// unavailable and the next publishes redial and succeed; connections are counted.
func TestRecovery(t *testing.T) {
	var hold sync.Mutex
	holding := true
	f := newFake(t, func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
		hold.Lock()
		defer hold.Unlock()
		if !holding {
			w.ack(ch, tag, false)
		}
	})
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	done := make(chan error, 1)
	if err := p.PublishAsync(0, "t", []byte("pending"), func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(f.publishes()) == 1 })
	hold.Lock()
	holding = false
	hold.Unlock()
	f.dropAll()
	if err := <-done; !errors.Is(err, publishers.ErrUnavailable) {
		t.Fatalf("pending publish: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := p.Publish(ctxT(t, time.Second), 0, "t", []byte("again"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: %v", err)
		}
	}
	if c := p.ConnCounts(0); c.Opened < 2 || c.Reopened < 1 {
		t.Fatalf("ConnCounts = %+v", c)
	}
	if n := len(f.publishes()); n != 2 {
		t.Fatalf("broker got %d publishes, want 2: the pending one was not resent", n)
	}
}

// TestHostsInOrder: host k publishes to URLs[k], one connection each.
func TestHostsInOrder(t *testing.T) {
	fakes := []*fakeBroker{newFake(t, acker), newFake(t, acker), newFake(t, acker)}
	var urls []string
	for _, f := range fakes {
		urls = append(urls, f.url())
	}
	p, _ := newTestPublisher(t, urls, nil)
	for k := range fakes {
		for range k + 1 {
			if err := p.Publish(ctxT(t, 2*time.Second), k, "t", []byte{byte(k)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, f := range fakes {
		got := f.publishes()
		if len(got) != k+1 || got[0].body[0] != byte(k) {
			t.Errorf("host %d got %d publishes (%v)", k, len(got), got)
		}
		if c := p.ConnCounts(k); c.Opened != 1 {
			t.Errorf("host %d: %+v connections", k, c)
		}
		if p.Hosts()[k] != f.ln.Addr().String() {
			t.Errorf("Hosts()[%d] = %q", k, p.Hosts()[k])
		}
	}
}

// TestConnectionsPerHost: a host opens all its connections, each with its own confirm stream, each once;
// with all of them lost it redials them, and every publish answered reached the broker.
func TestConnectionsPerHost(t *testing.T) {
	f := newFake(t, acker)
	p, _ := newTestPublisher(t, []string{f.url()}, func(c *Config) { c.ConnectionsPerHost = 3 })
	for i := range 6 {
		if err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte{byte(i)}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// The first request waits for its slot's dial; the next ones find it live and take it while their
	// own slots dial in the background.
	waitFor(t, func() bool { return p.ConnCounts(0).Opened == 3 })
	if c := p.ConnCounts(0); c.Reopened != 0 || c.DialFailures != 0 {
		t.Fatalf("ConnCounts = %+v, want 3 opened, none reopened", c)
	}
	f.dropAll()
	deadline := time.Now().Add(5 * time.Second)
	ok := 0
	for ok < 6 {
		if err := p.Publish(ctxT(t, time.Second), 0, "t", []byte("again")); err == nil {
			ok++
		} else if time.Now().After(deadline) {
			t.Fatalf("no recovery: %v", err)
		}
	}
	if c := p.ConnCounts(0); c.Reopened < 1 || c.Opened > 6 {
		t.Errorf("ConnCounts = %+v, want the lost connections redialled, at most once each", c)
	}
	if n := len(f.publishes()); n < 12 {
		t.Errorf("broker got %d publishes, want the 12 answered", n)
	}
}

// TestCloseDuringPublishes: Close is idempotent, fails what is pending with ErrClosed, every done runs
// once, and later calls answer ErrClosed.
func TestCloseDuringPublishes(t *testing.T) {
	f := newFake(t, func(*fakeConn, uint16, uint64, fakePublish) {}) // never confirms
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	for range 50 {
		wg.Add(1)
		if err := p.PublishAsync(0, "t", []byte("x"), func(err error) {
			mu.Lock()
			calls++
			mu.Unlock()
			if !errors.Is(err, publishers.ErrClosed) {
				t.Errorf("pending at close: %v", err)
			}
			wg.Done()
		}); err != nil {
			wg.Done()
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- p.Publish(context.Background(), 0, "t", []byte("sync")) }()
	waitFor(t, func() bool { return len(f.publishes()) == 51 })
	_ = p.Close()
	_ = p.Close()
	wg.Wait()
	if err := <-errc; !errors.Is(err, publishers.ErrClosed) {
		t.Fatalf("blocked Publish: %v", err)
	}
	if calls != 50 {
		t.Fatalf("%d done calls, want 50", calls)
	}
	if err := p.Publish(ctxT(t, time.Second), 0, "t", nil); !errors.Is(err, publishers.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := p.PublishAsync(0, "t", nil, func(error) { t.Error("done ran for a refused publish") }); !errors.Is(err, publishers.ErrClosed) {
		t.Fatalf("async after Close: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, 5*time.Second, "the condition", cond)
}

// TestBrokerStopsReading: a broker that stops reading (frozen, or blocking the connection as RabbitMQ
// does under a resource alarm) fills the socket and blocks the client library's write. Callers never
// wait on it: a sync publish returns by its deadline, and the write deadline ends the connection so
// every async done runs.
func TestBrokerStopsReading(t *testing.T) {
	release := make(chan struct{})
	f := newFake(t, func(*fakeConn, uint16, uint64, fakePublish) { <-release })
	t.Cleanup(func() { close(release) }) // before the fake closes: its reader is held here
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	p.stall = time.Second
	if err := p.Publish(ctxT(t, 200*time.Millisecond), 0, "t", []byte("first")); !errors.Is(err, publishers.ErrTimeout) {
		t.Fatalf("first: %v", err)
	}
	big := make([]byte, 1<<20)
	const n = 64 // far more than the socket buffers hold
	done := make(chan error, n)
	for range n {
		if err := p.PublishAsync(0, "t", big, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := p.Publish(ctxT(t, 300*time.Millisecond), 0, "t", []byte("sync")); !errors.Is(err, publishers.ErrTimeout) && !errors.Is(err, publishers.ErrUnavailable) {
		t.Fatalf("sync behind a blocked write: %v", err)
	}
	if d := time.Since(start); d > 600*time.Millisecond {
		t.Fatalf("sync publish returned after %v, its deadline was 300ms", d)
	}
	timeout := time.After(p.stall + 3*time.Second)
	for i := range n {
		select {
		case err := <-done:
			if !errors.Is(err, publishers.ErrUnavailable) {
				t.Fatalf("async %d: %v", i, err)
			}
		case <-timeout:
			t.Fatalf("%d of %d async dones ran within the write stall bound", i, n)
		}
	}
}

// TestBlocked: while the broker blocks the connection (connection.blocked: a resource alarm), publishes
// fail at once as unavailable instead of waiting for their deadline; after connection.unblocked they
// go through again.
func TestBlocked(t *testing.T) {
	var mu sync.Mutex
	var conn *fakeConn
	f := newFake(t, func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
		mu.Lock()
		conn = w
		mu.Unlock()
		if tag == 1 {
			w.method(0, 10, 60, shortstr(nil, "low on memory"))
		}
		w.ack(ch, tag, false)
	})
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	if err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { l := p.pool.Live(0); return l != nil && l.blocked.Load() != nil })
	start := time.Now()
	err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("2"))
	if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "low on memory") || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("while blocked: %v after %v", err, time.Since(start))
	}
	mu.Lock()
	conn.method(0, 10, 61, nil)
	mu.Unlock()
	waitFor(t, func() bool { l := p.pool.Live(0); return l != nil && l.blocked.Load() == nil })
	if err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("3")); err != nil {
		t.Fatalf("after unblocked: %v", err)
	}
}

// TestPing: Ping proves the broker answers (a frozen one fails it by the caller's deadline), reuses
// its result for a second, and fails fast for a refused host.
func TestPing(t *testing.T) {
	f := newFake(t, acker)
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	if err := p.Ping(ctxT(t, 2*time.Second), 0); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	for range 100 { // reused: no round trip each
		if err := p.Ping(ctxT(t, 2*time.Second), 0); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	}
	if c := p.ConnCounts(0); c.Opened != 1 {
		t.Fatalf("Ping made connections: %+v", c)
	}
	if err := p.Ping(ctxT(t, time.Second), 5); err == nil {
		t.Fatal("Ping of host 5 of 1 passed")
	}

	frozen := newFake(t, acker)
	fp, _ := newTestPublisher(t, []string{frozen.url()}, nil)
	if err := fp.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("x")); err != nil {
		t.Fatal(err)
	}
	frozen.freezeAll()
	start := time.Now()
	if err := fp.Ping(ctxT(t, 300*time.Millisecond), 0); !errors.Is(err, publishers.ErrTimeout) || time.Since(start) > time.Second {
		t.Fatalf("Ping of a frozen broker: %v after %v", err, time.Since(start))
	}
}

// TestSlowDial: the shared check of a broker slow to set connections up, on one connection per host.
func TestSlowDial(t *testing.T) {
	f := newFake(t, acker)
	publishertest.RunSlowDial(t, publishertest.SlowDialCase{Backend: f.ln.Addr().String(), MaxConns: 1,
		New: func(t *testing.T, addr string, _ *tls.Config) publishers.Publisher {
			p, _ := newTestPublisher(t, []string{"amqp://u:secretpw@" + addr + "/"}, nil)
			return p
		}})
}

// closesWithin calls closeFn and fails t unless it returns within d. Past d it calls unstick (which
// cuts the broker's side) and still waits for closeFn, so the test leaves nothing running.
func closesWithin(t *testing.T, d time.Duration, closeFn func() error, unstick func()) {
	t.Helper()
	start := time.Now()
	ended := make(chan struct{})
	go func() { _ = closeFn(); close(ended) }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ended:
		return
	case <-timer.C:
	}
	unstick()
	<-ended
	t.Errorf("Close did not return within %v (it did %v after it was called, once the broker's side was cut)", d, time.Since(start).Round(time.Millisecond))
}

// heartbeating is a broker that heartbeats every 200 ms whatever else it does, and a client config
// whose heartbeat timeout those heartbeats keep from firing.
var heartbeating = fakeOpts{heartbeat: 200 * time.Millisecond}

func shortHeartbeat(c *Config) { c.Heartbeat = time.Second }

// closeCases are brokers that never answer connection.close but keep heartbeating, so the client
// library's heartbeater keeps pushing the read deadline of the polite close forward.
var closeCases = []struct {
	name   string
	opts   fakeOpts
	freeze bool // stop reading after the connection is up
}{
	{name: "close-ok never comes", opts: fakeOpts{heartbeat: heartbeating.heartbeat, ignoreClose: true}},
	{name: "reads nothing (a resource alarm blocks the connection)", opts: heartbeating, freeze: true},
}

// TestCloseHeartbeatingBroker: Close is bounded (closeWait for confirms, closeWait for the goodbye)
// while the broker heartbeats but answers nothing, as RabbitMQ does under a memory alarm.
func TestCloseHeartbeatingBroker(t *testing.T) {
	for _, tc := range closeCases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWith(t, tc.opts, acker)
			p, _ := newTestPublisher(t, []string{f.url()}, shortHeartbeat)
			if err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if tc.freeze {
				f.freezeAll()
			}
			closesWithin(t, 2*closeWait+time.Second, p.Close, f.dropAll)
		})
	}
}

// TestDeclarationUnanswered: a queue.declare the broker never answers, on a connection it keeps alive
// with heartbeats, fails it and everything queued behind it within maxWait (plus a tick): the
// PublishAsync bound holds whatever the writer waits on. What was queued is never sent.
func TestDeclarationUnanswered(t *testing.T) {
	f := newFakeWith(t, fakeOpts{heartbeat: heartbeating.heartbeat, ignoreDeclare: "slow"}, acker)
	p, _ := newTestPublisher(t, []string{f.url()}, shortHeartbeat)
	p.maxWait = 1500 * time.Millisecond
	start := time.Now()
	done := make(chan error, 4)
	for _, topic := range []string{"slow", "t"} {
		if err := p.PublishAsync(0, topic, []byte(topic), func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	bound := time.After(p.maxWait + stallTick + time.Second)
	for i := range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, publishers.ErrUnavailable) {
				t.Fatalf("done %d: %v, want unavailable", i, err)
			}
		case <-bound:
			t.Fatalf("%d of 2 dones ran within %v of the publishes (maxWait %v)", i, time.Since(start).Round(time.Millisecond), p.maxWait)
		}
	}
	if n := len(f.publishes()); n != 0 {
		t.Fatalf("broker got %d publishes: what was queued behind the declaration was sent", n)
	}
	// The connection was given up; publishing redials (after the backoff of a connection that never
	// answered) and goes through.
	testwait.Until(t, 5*time.Second, "a publish after the stalled connection", func() error {
		return p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("again"))
	})
	if n := len(f.publishes()); n != 1 {
		t.Fatalf("broker got %d publishes, want the one acknowledged", n)
	}
	select {
	case err := <-done:
		t.Fatalf("a done ran twice: %v", err)
	default:
	}
}

// TestBogusConfirms: a confirm for a delivery tag never published, or one confirmed already, closes
// the connection as a protocol violation before the client library acts on it: a multiple ack up to
// 2^40 would have its reader hand over every tag up to it (hours of CPU, and Close waits for it), and
// single acks it cannot sequence stay in its memory for good. The publish it covers is not
// acknowledged, and Close stays bounded.
func TestBogusConfirms(t *testing.T) {
	unavailable := publishers.ErrUnavailable
	for _, tc := range []struct {
		name      string
		onPublish func(w *fakeConn, ch uint16, tag uint64, p fakePublish)
		want      [2]error // two publishes in turn; nil: acknowledged
	}{
		{name: "ack, multiple, up to 2^40", onPublish: func(w *fakeConn, ch uint16, _ uint64, _ fakePublish) {
			w.ack(ch, 1<<40, true)
		}, want: [2]error{unavailable, unavailable}},
		{name: "nack, multiple, up to 2^40", onPublish: func(w *fakeConn, ch uint16, _ uint64, _ fakePublish) {
			w.nackMultiple(ch, 1<<40, true)
		}, want: [2]error{unavailable, unavailable}},
		{name: "acks of tags never published, then the right one", onPublish: func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
			for i := range uint64(1000) {
				w.ack(ch, 1<<40+i, false)
			}
			w.ack(ch, tag, false)
		}, want: [2]error{unavailable, unavailable}},
		{name: "acks a tag again", onPublish: func(w *fakeConn, ch uint16, tag uint64, _ fakePublish) {
			if tag == 2 {
				w.ack(ch, 1, false) // confirmed already: the first Publish returned
			}
			w.ack(ch, tag, false)
		}, want: [2]error{nil, unavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.onPublish)
			p, _ := newTestPublisher(t, []string{f.url()}, nil)
			for i, want := range tc.want {
				err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("x"))
				if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
					t.Errorf("publish %d: %v, want %v", i+1, err, want)
				}
			}
			if p.ProtocolErrors(0) == 0 {
				t.Error("no protocol violation counted")
			}
			closesWithin(t, closeWait, p.Close, f.dropAll)
		})
	}
}

// TestPingReuse: with several connections per host (the default is 2, which requests take in turn)
// one Ping result answers for the host for pingReuse, but not once a connection was found lost.
func TestPingReuse(t *testing.T) {
	f := newFake(t, acker)
	p, _ := newTestPublisher(t, []string{f.url()}, func(c *Config) { c.ConnectionsPerHost = 2 })
	for range 4 { // both connections up
		if err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return p.ConnCounts(0).Opened == 2 })
	if err := p.Ping(ctxT(t, 2*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	base, start := f.chanOpens.Load(), time.Now()
	const n = 100
	for range n {
		if err := p.Ping(ctxT(t, 2*time.Second), 0); err != nil {
			t.Fatal(err)
		}
	}
	// A slow machine may take longer than pingReuse for them: a check per pingReuse is the bound.
	if opens, allowed := f.chanOpens.Load()-base, int64(time.Since(start)/pingReuse); opens > allowed {
		t.Fatalf("%d Pings in %v opened %d channels, want at most %d", n, time.Since(start).Round(time.Millisecond), opens, allowed)
	}

	f.dropAll()
	waitFor(t, func() bool { // the listeners saw it
		dead := true
		p.pool.EachLive(func(l *link) { dead = dead && l.Dead() })
		return dead
	})
	before := f.chanOpens.Load()
	if err := p.Ping(ctxT(t, 2*time.Second), 0); err == nil && f.chanOpens.Load() == before {
		t.Fatal("Ping passed on a result from before the connections were lost")
	}
}

// TestBatchDeadline: a batch whose deadline passes while its bodies are being handed to the broker
// answers a timeout, and the bodies not handed over yet are never sent; the connection goes on.
func TestBatchDeadline(t *testing.T) {
	f := newFake(t, func(w *fakeConn, ch uint16, tag uint64, p fakePublish) {
		if len(p.body) > 1000 {
			time.Sleep(20 * time.Millisecond) // a slow reader: the batch's bodies fill the socket
		}
		w.ack(ch, tag, false)
	})
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	if err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte("warm")); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 256<<10)
	bodies := make([][]byte, 64) // 16 MiB: more than the socket buffers hold, and over a second to read
	for i := range bodies {
		bodies[i] = body
	}
	if err := p.PublishBatch(ctxT(t, 100*time.Millisecond), 0, "t", bodies); !errors.Is(err, publishers.ErrTimeout) {
		t.Fatalf("batch: %v, want a timeout", err)
	}
	// The writer works in order: once this is confirmed, whatever it sent of the batch was read.
	if err := p.Publish(ctxT(t, 10*time.Second), 0, "t", []byte("after")); err != nil {
		t.Fatalf("publish after the batch: %v", err)
	}
	sent := len(f.publishes()) - 2
	t.Logf("%d of the batch's %d bodies were sent", sent, len(bodies))
	if sent >= len(bodies) {
		t.Fatalf("all %d bodies were sent after the batch's caller was told it timed out", sent)
	}
}

// TestSlowAsyncDone: a PublishAsync done that blocks does not hold the listener, which goes on taking
// returns and confirms: the client library drops a basic.return it cannot hand over within 5 s, and an
// unroutable publish would then pass for stored.
func TestSlowAsyncDone(t *testing.T) {
	f := newFake(t, func(w *fakeConn, ch uint16, tag uint64, p fakePublish) {
		if string(p.body) == "unroutable" {
			w.ret(ch, p, p.messageID)
		}
		w.ack(ch, tag, false)
	})
	p, _ := newTestPublisher(t, []string{f.url()}, nil)
	release, inDone := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before Close, which waits for the done
	if err := p.PublishAsync(0, "t", []byte("slow"), func(error) { close(inDone); <-release }); err != nil {
		t.Fatal(err)
	}
	<-inDone
	for _, tc := range []struct {
		body string
		want error // nil: acknowledged
	}{
		{body: "unroutable", want: publishers.ErrRejected},
		{body: "routable"},
	} {
		err := p.Publish(ctxT(t, 2*time.Second), 0, "t", []byte(tc.body))
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s while a done blocks: %v, want %v", tc.body, err, tc.want)
		}
	}
}
