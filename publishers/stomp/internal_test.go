package stomp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
	"go.yaml.in/yaml/v3"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

func TestSTOMPConfigValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; empty means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"hosts and login", func(c *Config) {
			c.Hosts, c.Login, c.Passcode = []string{"127.0.0.1:61613", "amq:61613"}, "u", "p"
		}, ""},
		{"topic prefix, vhost, no heart-beats", func(c *Config) { c.Prefix, c.VHost, c.HeartBeat = "/topic/", "/", 0 }, ""},
		{"second host without port", func(c *Config) { c.Hosts = []string{"a:1", "b"} }, "stomp.hosts[1]:"},
		{"passcode without login", func(c *Config) { c.Passcode = "p" }, "stomp.passcode:"},
		{"prefix without leading slash", func(c *Config) { c.Prefix = "queue/" }, "stomp.prefix:"},
		{"prefix without trailing slash", func(c *Config) { c.Prefix = "/queue" }, "stomp.prefix:"},
		{"prefix with colon", func(c *Config) { c.Prefix = "/queue:x/" }, "stomp.prefix:"},
		{"vhost with newline", func(c *Config) { c.VHost = "a\nb" }, "stomp.vhost:"},
		{"login with colon", func(c *Config) { c.Login = "a:b" }, "stomp.login:"},
		{"no connections", func(c *Config) { c.ConnectionsPerHost = 0 }, "stomp.connections_per_host:"},
		{"negative heart-beat", func(c *Config) { c.HeartBeat = -time.Second }, "stomp.heartbeat:"},
		{"sub-millisecond heart-beat", func(c *Config) { c.HeartBeatReceive = time.Microsecond }, "stomp.heartbeat_receive:"},
		{"zero grace", func(c *Config) { c.HeartBeatGrace = 0 }, "stomp.heartbeat_grace:"},
		{"zero dial timeout", func(c *Config) { c.DialTimeout = 0 }, "stomp.dial_timeout:"},
		{"no embedded without hosts", func(c *Config) { c.Embedded = 0 }, "stomp.embedded:"},
		{"no embedded with hosts", func(c *Config) { c.Embedded, c.Hosts = 0, []string{"a:1"} }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.mutate(&cfg)
			err := cfg.Validate("stomp")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}

func TestValidateSTOMPTopic(t *testing.T) {
	cases := []struct {
		name  string
		topic string
		ok    bool
	}{
		{"plain", "orders", true},
		{"dots, dashes, inner slash", "a.b-c_d/e", true},
		{"unicode", "bestellungen-ü", true},
		{"max length", strings.Repeat("a", MaxTopicLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", MaxTopicLen+1), false},
		{"leading slash", "/queue/x", false},
		{"colon", "a:b", false},
		{"backslash", `a\b`, false},
		{"newline", "a\nb", false},
		{"NUL", "a\x00b", false},
		{"trailing space", "a ", false},
		{"invalid UTF-8", "a\xffb", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := validateSTOMPTopic(c.topic); (err == nil) != c.ok {
				t.Fatalf("validate(%q) = %v, want ok=%v", c.topic, err, c.ok)
			}
		})
	}
}

func TestNegotiateHeartBeats(t *testing.T) {
	s := time.Second
	cases := []struct {
		name       string
		send, recv time.Duration
		header     string
		want       heartBeats
	}{
		{"no header", 10 * s, 5 * s, "", heartBeats{}},
		{"broker wants none", 10 * s, 5 * s, "0,0", heartBeats{}},
		{"Artemis: sends none, wants ours at 30s", 10 * s, 0, "0,30000", heartBeats{send: 30 * s}},
		{"ours slower wins", 10 * s, 0, "0,1000", heartBeats{send: 10 * s}},
		{"both ways", 10 * s, 5 * s, "20000,1000", heartBeats{send: 10 * s, recv: 20 * s}},
		{"we send none", 0, 5 * s, "1000,1000", heartBeats{recv: 5 * s}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := negotiate(c.send, c.recv, c.header)
			if err != nil || got != c.want {
				t.Fatalf("negotiate = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	if _, err := negotiate(s, s, "x,1"); err == nil {
		t.Error("a malformed heart-beat header was accepted")
	}
}

func TestSecretRedacted(t *testing.T) {
	out, err := yaml.Marshal(struct {
		Set   publishers.Secret `yaml:"set"`
		Unset publishers.Secret `yaml:"unset"`
	}{Set: "hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter2") || !strings.Contains(string(out), "set: <redacted>") || !strings.Contains(string(out), `unset: ""`) {
		t.Errorf("YAML:\n%s", out)
	}
	if s := fmt.Sprint(publishers.Secret("hunter2")); s != "<redacted>" {
		t.Errorf("formatted as %q", s)
	}
}

// fakeBroker is a scripted STOMP server: it answers CONNECT with CONNECTED (or what connect returns)
// and hands every later frame to serve, which writes the answer (or nothing).
type fakeBroker struct {
	ln      net.Listener
	connect func(f *frame.Frame) *frame.Frame
	serve   func(w *frame.Writer, f *frame.Frame)

	mu     sync.Mutex
	frames []*frame.Frame
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startFakeBroker(t *testing.T, serve func(w *frame.Writer, f *frame.Frame)) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{ln: ln, serve: serve, connect: func(*frame.Frame) *frame.Frame {
		return frame.New(frame.CONNECTED, frame.Version, "1.2", frame.HeartBeat, "0,0")
	}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

func (b *fakeBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			r, w := frame.NewReader(c), frame.NewWriter(c)
			for first := true; ; first = false {
				f, err := r.Read()
				if err != nil {
					return
				}
				if f == nil {
					continue
				}
				b.mu.Lock()
				b.frames = append(b.frames, f)
				b.mu.Unlock()
				if first {
					_ = w.Write(b.connect(f))
					continue
				}
				b.serve(w, f)
			}
		}()
	}
}

func (b *fakeBroker) close() {
	b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// connections is how many connections the broker accepted.
func (b *fakeBroker) connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *fakeBroker) received() []*frame.Frame {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*frame.Frame(nil), b.frames...)
}

// receipts answers every frame that asks for a receipt.
func receipts(w *frame.Writer, f *frame.Frame) {
	if id, ok := f.Header.Contains(frame.Receipt); ok {
		_ = w.Write(frame.New(frame.RECEIPT, frame.ReceiptId, id))
	}
}

func newTestSTOMP(t *testing.T, mutate func(*Config), hosts ...string) *Publisher {
	t.Helper()
	c := DefaultConfig()
	c.Hosts = hosts
	if mutate != nil {
		mutate(&c)
	}
	p, err := New(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The frames on the wire: CONNECT with vhost and credentials, SEND with prefix, persistent and receipt,
// and the batch as BEGIN, SENDs in the transaction, COMMIT with the receipt; to RabbitMQ, which answers
// COMMIT before it stored anything (commitNotStored), as SENDs each with its receipt.
func TestSTOMPFrames(t *testing.T) {
	transaction := []string{
		"BEGIN transaction=* ",
		"SEND destination=/topic/orders content-length=1 persistent=true transaction=* a",
		"SEND destination=/topic/orders content-length=2 persistent=true transaction=* bb",
		"COMMIT transaction=* receipt=* ",
	}
	receipted := []string{
		"SEND destination=/topic/orders content-length=1 persistent=true receipt=* a",
		"SEND destination=/topic/orders content-length=2 persistent=true receipt=* bb",
	}
	for _, tc := range []struct {
		name, server string
		batch        []string
	}{
		{"no server header", "", transaction},
		{"Artemis", "ActiveMQ-Artemis/2.40.0 ActiveMQ Artemis Messaging Engine", transaction},
		{"RabbitMQ", "RabbitMQ/3.10.8", receipted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFakeBroker(t, receipts)
			if tc.server != "" {
				b.connect = func(*frame.Frame) *frame.Frame {
					return frame.New(frame.CONNECTED, frame.Version, "1.2", frame.HeartBeat, "0,0", frame.Server, tc.server)
				}
			}
			p := newTestSTOMP(t, func(c *Config) {
				c.Login, c.Passcode, c.VHost, c.Prefix, c.Persistent, c.ConnectionsPerHost = "u", "secret", "/", "/topic/", true, 1
			}, b.addr())
			if err := p.Publish(ctxFor(t, 2*time.Second), 0, "orders", []byte("one")); err != nil {
				t.Fatal(err)
			}
			if err := p.PublishBatch(ctxFor(t, 2*time.Second), 0, "orders", [][]byte{[]byte("a"), []byte("bb")}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			if err := p.PublishAsync(0, "orders", []byte("async"), func(err error) { done <- err }); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range b.received() {
				var hs []string
				for i := range f.Header.Len() {
					k, v := f.Header.GetAt(i)
					if k == frame.Receipt || k == frame.Transaction {
						v = "*" // ids are the connection's own
					}
					hs = append(hs, k+"="+v)
				}
				got = append(got, f.Command+" "+strings.Join(hs, " ")+" "+string(f.Body))
			}
			want := append([]string{
				"CONNECT accept-version=1.2 host=/ heart-beat=10000,0 login=u passcode=secret ",
				"SEND destination=/topic/orders content-length=3 persistent=true receipt=* one",
			}, tc.batch...)
			want = append(want, "SEND destination=/topic/orders content-length=5 persistent=true receipt=* async")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("frames:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestSTOMPErrors(t *testing.T) {
	t.Run("ERROR for a SEND is 502, and the connection is redialled", func(t *testing.T) {
		b := startFakeBroker(t, func(w *frame.Writer, f *frame.Frame) {
			if string(f.Body) == "bad" {
				_ = w.Write(frame.New(frame.ERROR, frame.Message, "no such destination", frame.ReceiptId, f.Header.Get(frame.Receipt)))
				return
			}
			receipts(w, f)
		})
		p := newTestSTOMP(t, func(c *Config) { c.ConnectionsPerHost = 1 }, b.addr())
		err := p.Publish(ctxFor(t, 2*time.Second), 0, "t", []byte("bad"))
		if !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "no such destination") {
			t.Fatalf("got %v, want publishers.ErrRejected with the broker's message", err)
		}
		if err := p.Publish(ctxFor(t, 2*time.Second), 0, "t", []byte("good")); err != nil {
			t.Fatalf("after the ERROR: %v", err)
		}
	})
	// A refused login is a refused connection (503), as with every broker; 502 is a message's own refusal.
	t.Run("CONNECT refused is 503", func(t *testing.T) {
		b := startFakeBroker(t, receipts)
		b.connect = func(*frame.Frame) *frame.Frame {
			f := frame.New(frame.ERROR, frame.Message, "bad credentials")
			f.Body = []byte("bad credentials\n") // Artemis repeats the header in the body
			return f
		}
		p := newTestSTOMP(t, nil, b.addr())
		err := p.Publish(ctxFor(t, 2*time.Second), 0, "t", []byte("x"))
		if !errors.Is(err, publishers.ErrUnavailable) || errors.Is(err, publishers.ErrRejected) ||
			!strings.HasSuffix(err.Error(), "CONNECT refused: bad credentials") {
			t.Fatalf("got %v, want publishers.ErrUnavailable with the broker's message, once", err)
		}
	})
	t.Run("no receipt is 504 at the deadline", func(t *testing.T) {
		b := startFakeBroker(t, func(*frame.Writer, *frame.Frame) {})
		p := newTestSTOMP(t, nil, b.addr())
		start := time.Now()
		err := p.Publish(ctxFor(t, 300*time.Millisecond), 0, "t", []byte("x"))
		if !errors.Is(err, publishers.ErrTimeout) || time.Since(start) > time.Second {
			t.Fatalf("got %v after %v, want publishers.ErrTimeout after 300ms", err, time.Since(start))
		}
	})
	t.Run("nothing listening is 503, then fail-fast", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		p := newTestSTOMP(t, func(c *Config) { c.ConnectionsPerHost = 1 }, addr)
		for i := range 3 {
			if err := p.Publish(ctxFor(t, 2*time.Second), 0, "t", []byte("x")); !errors.Is(err, publishers.ErrUnavailable) {
				t.Fatalf("publish %d: got %v, want publishers.ErrUnavailable", i, err)
			}
		}
	})
	t.Run("connection lost fails pending async with 503, Close fails none twice", func(t *testing.T) {
		var once sync.Once
		gotSend := make(chan struct{})
		b := startFakeBroker(t, func(*frame.Writer, *frame.Frame) { once.Do(func() { close(gotSend) }) })
		p := newTestSTOMP(t, nil, b.addr())
		done := make(chan error, 2)
		if err := p.PublishAsync(0, "t", []byte("x"), func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		<-gotSend
		b.close()
		if err := <-done; !errors.Is(err, publishers.ErrUnavailable) {
			t.Fatalf("got %v, want publishers.ErrUnavailable", err)
		}
		p.Close()
		select {
		case err := <-done:
			t.Fatalf("done called twice: %v", err)
		default:
		}
	})
	t.Run("host out of range", func(t *testing.T) {
		p := newTestSTOMP(t, nil, "127.0.0.1:1")
		if err := p.Publish(ctxFor(t, time.Second), 1, "t", []byte("x")); err == nil {
			t.Fatal("host 1 of 1 accepted")
		}
	})
}

// Receipts are matched by id: a broker answering out of order (here: each pair reversed) gets every
// request its own outcome, and one connection carries many requests.
func TestSTOMPReceiptsOutOfOrder(t *testing.T) {
	var (
		mu   sync.Mutex
		held *frame.Frame
	)
	b := startFakeBroker(t, func(w *frame.Writer, f *frame.Frame) {
		mu.Lock()
		defer mu.Unlock()
		if held == nil {
			held = f
			return
		}
		for _, g := range []*frame.Frame{f, held} {
			id := g.Header.Get(frame.Receipt)
			if string(g.Body) == "bad" {
				_ = w.Write(frame.New(frame.ERROR, frame.Message, "refused", frame.ReceiptId, id))
				continue
			}
			_ = w.Write(frame.New(frame.RECEIPT, frame.ReceiptId, id))
		}
		held = nil
	})
	p := newTestSTOMP(t, func(c *Config) { c.ConnectionsPerHost = 1 }, b.addr())
	const n = 100
	errs := make([]chan error, n)
	for i := range n {
		errs[i] = make(chan error, 1)
		if err := p.PublishAsync(0, "t", fmt.Appendf(nil, "m%d", i), func(err error) { errs[i] <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		select {
		case err := <-errs[i]:
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d: no outcome within 5s", i)
		}
	}
	if got := len(b.received()); got != n+1 {
		t.Errorf("broker received %d frames, want CONNECT and %d SENDs", got, n)
	}
}

// TestSTOMPRefusalRemembered: a SEND refused for want of permission (the ERROR naming its receipt, or
// its words naming the destination: RabbitMQ names no receipt) is refused again without being sent,
// naming the broker's words; another refusal is not remembered, nor a permission refusal whose words
// name another destination; other destinations go on.
func TestSTOMPRefusalRemembered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		named    bool   // the ERROR names the SEND's receipt
		message  string // its message header
		body     string
		remember bool
	}{
		{"RabbitMQ", false, "access_refused", "ACCESS_REFUSED - access to queue 'secret' in vhost '/' refused for user 'u'", true},
		{"Artemis", true, "AMQ229032 User u does not have permission='CREATE_ADDRESS' on address secret", "", true},
		{"Artemis, an address that exists", true, "AMQ339011 Error sending message CoreMessage[messageID=192, address=secret]@220888076", "", false},
		{"ActiveMQ Classic", true, "User u is not authorized to write to: queue://secret", "", true},
		{"another destination named", false, "access_refused", "ACCESS_REFUSED - access to queue 'secret.eu' in vhost '/' refused for user 'u'", false},
		{"not a permission", true, "AMQ229216: Invalid queue name: secret", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			sends := map[string]int{}
			b := startFakeBroker(t, func(w *frame.Writer, f *frame.Frame) {
				dest := f.Header.Get(frame.Destination)
				mu.Lock()
				sends[dest]++
				mu.Unlock()
				if dest != "/queue/secret" {
					receipts(w, f)
					return
				}
				e := frame.New(frame.ERROR, frame.Message, tc.message)
				if tc.named {
					e.Header.Add(frame.ReceiptId, f.Header.Get(frame.Receipt))
				}
				e.Body = []byte(tc.body)
				_ = w.Write(e)
			})
			p := newTestSTOMP(t, func(c *Config) { c.ConnectionsPerHost = 1 }, b.addr())
			for try := range 2 {
				err := p.Publish(ctxFor(t, 5*time.Second), 0, "secret", []byte("x"))
				for deadline := time.Now().Add(5 * time.Second); errors.Is(err, publishers.ErrUnavailable) && time.Now().Before(deadline); {
					time.Sleep(50 * time.Millisecond) // the connection the ERROR closed is being redialled
					err = p.Publish(ctxFor(t, 5*time.Second), 0, "secret", []byte("x"))
				}
				if !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), tc.message) {
					t.Fatalf("try %d: %v, want rejected with the broker's words", try, err)
				}
				t.Logf("try %d: %v", try, err)
			}
			testwaitPublish(t, p, "allowed")
			mu.Lock()
			defer mu.Unlock()
			want := 2
			if tc.remember {
				want = 1
			}
			if sends["/queue/secret"] != want {
				t.Errorf("%d SENDs to /queue/secret, want %d", sends["/queue/secret"], want)
			}
		})
	}
}

// TestSTOMPRefusalRedialBurst: a refusal that is not remembered (Artemis' AMQ339011 for a full
// address) costs its connection each time. A few in a row are redialled at once
// (publishers.Backoff.ChurnBurst), so neither they nor a publish to another destination right after
// get a 503; a run of them is bounded by the redial policy (503s while the host backs off), its dials
// within publishertest.MaxDials.
func TestSTOMPRefusalRedialBurst(t *testing.T) {
	b := startFakeBroker(t, func(w *frame.Writer, f *frame.Frame) {
		if f.Header.Get(frame.Destination) != "/queue/full" {
			receipts(w, f)
			return
		}
		_ = w.Write(frame.New(frame.ERROR, frame.Message, "AMQ339011 Error sending message CoreMessage[address=full]",
			frame.ReceiptId, f.Header.Get(frame.Receipt)))
	})
	p := newTestSTOMP(t, func(c *Config) { c.ConnectionsPerHost = 1 }, b.addr())
	ctx := ctxFor(t, 10*time.Second)
	if err := p.Publish(ctx, 0, "allowed", []byte("first")); err != nil {
		t.Fatal(err)
	}
	const refusals = 4 // and the publish after: the default burst of 5 immediate redials
	for i := range refusals {
		if err := p.Publish(ctx, 0, "full", []byte("x")); !errors.Is(err, publishers.ErrRejected) {
			t.Fatalf("refusal %d of %d in a row: %v, want rejected (sent, refused), not a 503 for the redial", i+1, refusals, err)
		}
	}
	if err := p.Publish(ctx, 0, "allowed", []byte("after")); err != nil {
		t.Fatalf("a publish elsewhere after %d refusals in a row: %v, want success", refusals, err)
	}

	start := time.Now()
	dialsBefore := b.connections()
	unavailable := 0
	for range 200 {
		err := p.Publish(ctx, 0, "full", []byte("x"))
		switch {
		case errors.Is(err, publishers.ErrUnavailable):
			unavailable++
		case !errors.Is(err, publishers.ErrRejected):
			t.Fatalf("a refused publish: %v, want rejected or (while the host backs off) unavailable", err)
		}
	}
	elapsed := time.Since(start)
	dials := b.connections() - dialsBefore
	if bound := publishertest.MaxDials(publishers.DefaultBackoff(), elapsed, 1, true); dials > bound {
		t.Errorf("%d dials in %v of refusals in a row, want at most %d", dials, elapsed, bound)
	}
	if unavailable == 0 {
		t.Errorf("200 refusals in a row in %v were all sent: the redials are not bounded", elapsed)
	}
	t.Logf("200 refusals in a row: %d dials, %d answered 503 during backoff, in %v", dials, unavailable, elapsed)
}

// testwaitPublish publishes to topic until it succeeds (the connection an ERROR closed is redialled
// after the redial policy's pause), within 5 s.
func testwaitPublish(t *testing.T, p *Publisher, topic string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := p.Publish(ctxFor(t, time.Second), 0, topic, []byte("ok"))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Publish to %s: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestErrorText: an ERROR's words are its message header and, when short and saying something else,
// its body; a body that repeats the header, however punctuated, is left out.
func TestErrorText(t *testing.T) {
	for _, tc := range []struct{ name, message, body, want string }{
		{"header only", "access_refused", "", "access_refused"},
		{"body adds", "access_refused", "ACCESS_REFUSED - access to queue 'q' refused\n", "access_refused: ACCESS_REFUSED - access to queue 'q' refused"},
		{"body repeats", "bad credentials", "bad credentials\n", "bad credentials"},
		{"Artemis repeats, punctuated", "AMQ229032 User u does not have permission='CREATE_ADDRESS' on address q",
			"AMQ229032: User: u does not have permission='CREATE_ADDRESS' on address q", "AMQ229032 User u does not have permission='CREATE_ADDRESS' on address q"},
		{"long body left out", "failed", strings.Repeat("x", 600), "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := frame.New(frame.ERROR, frame.Message, tc.message)
			f.Body = []byte(tc.body)
			if got := errorText(f); got != tc.want {
				t.Errorf("errorText = %q, want %q", got, tc.want)
			}
		})
	}
}
