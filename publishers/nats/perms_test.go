package nats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// permServer runs a nats-server whose users may do only part of what mqtarget needs: "pub" may
// publish to allowed.> and the JetStream API and subscribe to _INBOX.> (what a JetStream publisher
// needs), "noinbox" may not subscribe to _INBOX.>, "noapi" may not publish to the JetStream API;
// "admin" may do everything (what the test itself uses to count).
func permServer(t testing.TB) string {
	allow := func(s ...string) *server.SubjectPermission { return &server.SubjectPermission{Allow: s} }
	user := func(name string, pub, sub *server.SubjectPermission) *server.User {
		return &server.User{Username: name, Password: name + "-pw", Permissions: &server.Permissions{Publish: pub, Subscribe: sub}}
	}
	s := startServer(t, server.Options{Users: []*server.User{
		{Username: "admin", Password: "admin-pw"},
		user("pub", allow("allowed.>", "$JS.API.>"), allow("_INBOX.>")),
		user("noinbox", allow("allowed.>", "$JS.API.>"), allow("nothing.at.all")),
		user("noapi", allow("allowed.>"), allow("_INBOX.>")),
	}})
	return s.Addr().String()
}

// permConfig is a config logging in to addr as user (permServer's password).
func permConfig(t testing.TB, addr, user string, jetstream bool) nats.Config {
	c := nats.DefaultConfig()
	c.Servers, c.JetStream = []string{addr}, jetstream
	c.User, c.PasswordFile = user, filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(c.PasswordFile, []byte(user+"-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// adminConn is a connection to addr as admin, closed when the test ends.
func adminConn(t testing.TB, addr string) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect("nats://"+addr, natsgo.UserInfo("admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// received counts what core NATS delivers on subject (a pattern) from now on.
func received(t testing.TB, nc *natsgo.Conn, subject string) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	if _, err := nc.Subscribe(subject, func(*natsgo.Msg) { n.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &n
}

// publishBy publishes one message (or a batch of two, or an async one) and returns its outcome.
func publishBy(t testing.TB, p *nats.Publisher, how, topic string) error {
	t.Helper()
	switch how {
	case "publish":
		return p.Publish(ctx(t), 0, topic, []byte("x"))
	case "batch":
		return p.PublishBatch(ctx(t), 0, topic, [][]byte{[]byte("x"), []byte("y")})
	case "async":
		return publishertest.AsyncResult(p, 0, topic, []byte("x"), 10*time.Second)
	}
	t.Fatalf("no such way to publish: %s", how)
	return nil
}

// TestPermissionViolation: a server that refuses a publish for want of permission drops it, keeps
// the connection and sends no PubAck, and a core NATS round trip succeeds all the same. Each way of
// publishing answers such a refusal as rejected (502) naming the subject, never as success and not
// at its deadline, and again when repeated (then without sending it); what is permitted goes
// through beside it and is stored (or delivered). A JetStream user who may not subscribe to its
// replies is unavailable (503); one who may not use the JetStream API is rejected naming it.
func TestPermissionViolation(t *testing.T) {
	addr := permServer(t)
	admin := adminConn(t, addr)
	for _, tc := range []struct {
		name      string
		user      string
		jetstream bool
		how       string
		topic     string
		want      error  // nil: stored (JetStream) or delivered (core)
		words     string // what the error names
	}{
		{"core publish permitted", "pub", false, "publish", "allowed.core1", nil, ""},
		{"core publish refused", "pub", false, "publish", "forbidden.core1", publishers.ErrRejected, `"forbidden.core1": permissions violation`},
		{"core batch refused", "pub", false, "batch", "forbidden.core2", publishers.ErrRejected, `"forbidden.core2": permissions violation`},
		{"core async refused", "pub", false, "async", "forbidden.core3", publishers.ErrRejected, `"forbidden.core3": permissions violation`},
		{"jetstream publish permitted", "pub", true, "publish", "allowed.js1", nil, ""},
		{"jetstream batch permitted", "pub", true, "batch", "allowed.js2", nil, ""},
		{"jetstream async permitted", "pub", true, "async", "allowed.js3", nil, ""},
		{"jetstream publish refused", "pub", true, "publish", "forbidden.js1", publishers.ErrRejected, `"forbidden.js1": permissions violation`},
		{"jetstream batch refused", "pub", true, "batch", "forbidden.js2", publishers.ErrRejected, `"forbidden.js2": permissions violation`},
		{"jetstream async refused", "pub", true, "async", "forbidden.js3", publishers.ErrRejected, `"forbidden.js3": permissions violation`},
		{"jetstream without its replies", "noinbox", true, "publish", "allowed.js4", publishers.ErrUnavailable, "_INBOX.>"},
		{"jetstream async without its replies", "noinbox", true, "async", "allowed.js5", publishers.ErrUnavailable, "_INBOX.>"},
		{"jetstream without its API", "noapi", true, "publish", "allowed.js6", publishers.ErrRejected, `"$JS.API.STREAM.INFO.allowed_js6": permissions violation`},
		{"jetstream async without its API", "noapi", true, "async", "allowed.js7", publishers.ErrRejected, `"$JS.API.STREAM.INFO.allowed_js7": permissions violation`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := nats.New(permConfig(t, addr, tc.user, tc.jetstream), publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			core := received(t, admin, tc.topic)
			msgs := 1
			if tc.how == "batch" {
				msgs = 2
			}
			for try := range 2 { // the second finds the refusal remembered
				err := publishBy(t, p, tc.how, tc.topic)
				switch {
				case tc.want == nil && err != nil:
					t.Fatalf("try %d: %v", try, err)
				case tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words)):
					t.Fatalf("try %d: %v, want %v naming %s", try, err, tc.want, tc.words)
				case err != nil:
					t.Logf("try %d: %v", try, err)
				}
			}
			want := 0
			if tc.want == nil {
				want = 2 * msgs
			}
			if tc.jetstream {
				if n := stored(t, admin, nats.StreamName(tc.topic)); n != uint64(want) {
					t.Fatalf("the stream holds %d messages, want %d", n, want)
				}
			} else {
				testwait.For(t, 5*time.Second, fmt.Sprintf("%d messages delivered", want), func() bool { return core.Load() == int64(want) })
			}
			if err := admin.Flush(); err != nil { // nothing more in flight to the subscriber
				t.Fatal(err)
			}
			if n := core.Load(); n != int64(want) {
				t.Fatalf("%d messages delivered on %s, want %d", n, tc.topic, want)
			}
		})
	}
}

// TestPermissionViolationConcurrent: core NATS publishes to permitted and refused subjects at once
// on one connection, each refused subject new (never remembered), so refusals for other subjects
// come between a publish and its round trip's PONG: every refused publish fails as rejected, every
// permitted one succeeds and was delivered.
func TestPermissionViolationConcurrent(t *testing.T) {
	addr := permServer(t)
	admin := adminConn(t, addr)
	delivered := received(t, admin, "allowed.>")
	p, err := nats.New(permConfig(t, addr, "pub", false), publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const workers, each = 8, 60
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				forbidden := i%2 == 0
				topic := fmt.Sprintf("allowed.w%d.m%d", w, i)
				if forbidden {
					topic = fmt.Sprintf("forbidden.w%d.m%d", w, i)
				}
				err := p.Publish(ctx(t), 0, topic, []byte("x"))
				switch {
				case !forbidden && err == nil:
					ok.Add(1)
				case forbidden && errors.Is(err, publishers.ErrRejected):
					refused.Add(1)
				default:
					errs <- fmt.Errorf("%s: %v", topic, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	testwait.For(t, 5*time.Second, "every permitted message delivered", func() bool { return delivered.Load() == ok.Load() })
	t.Logf("%d permitted and delivered, %d refused", ok.Load(), refused.Load())
}

// TestConsumePermissionViolation: Consume ends with the server's refusal instead of reading nothing
// (or the same messages again) for ever: a topic the user may not subscribe to is rejected, a
// JetStream user who may not subscribe to its replies is unavailable, one who may not use the
// JetStream API or acknowledge what it read rejected.
func TestConsumePermissionViolation(t *testing.T) {
	addr := permServer(t)
	for _, tc := range []struct {
		name      string
		user      string
		jetstream bool
		topic     string
		want      error
		words     string
		stored    bool // a message is in the topic's stream before Consume starts
	}{
		{"core subject refused", "pub", false, "forbidden.c1", publishers.ErrRejected, `subscription to "forbidden.c1": permissions violation`, false},
		{"jetstream without its replies", "noinbox", true, "allowed.c2", publishers.ErrUnavailable, "_INBOX.>", false},
		{"jetstream without its API", "noapi", true, "allowed.c3", publishers.ErrRejected, `publish to "$JS.API.STREAM.INFO.allowed_c3": permissions violation`, false},
		{"jetstream without its acks", "pub", true, "allowed.c4", publishers.ErrRejected, `publish to "$JS.ACK.allowed_c4.`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := nats.NewConsumer(permConfig(t, addr, tc.user, tc.jetstream), publishers.ConsumerOptions{}, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			if tc.stored {
				p, err := nats.New(permConfig(t, addr, "pub", true), publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				err = p.Publish(ctx(t), 0, tc.topic, []byte("read, not acknowledged"))
				_ = p.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = k.Consume(cctx, tc.topic, func(publishers.Delivery) {})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("Consume: %v, want %v naming %s", err, tc.want, tc.words)
			}
			t.Log(err)
		})
	}
}

// TestParseViolation: the subject is read from nats-server's words as nats.go reports them (Go-quoted
// by the server); anything else is no violation.
func TestParseViolation(t *testing.T) {
	wrap := func(text string) error { return fmt.Errorf("%w: %s", natsgo.ErrPermissionViolation, text) }
	for _, tc := range []struct {
		name    string
		err     error
		ok, sub bool
		subject string
	}{
		{"publish", wrap(`Permissions Violation for Publish to "orders.eu"`), true, false, "orders.eu"},
		{"subscription", wrap(`Permissions Violation for Subscription to "_INBOX.abc.*"`), true, true, "_INBOX.abc.*"},
		{"subscription with a queue", wrap(`Permissions Violation for Subscription to "t" using queue "g"`), true, true, "t"},
		{"a quote escaped", wrap(`Permissions Violation for Publish to "a\"b"`), true, false, `a"b`},
		{"unquoted", wrap(`Permissions Violation for Publish to orders`), false, false, ""},
		{"empty subject", wrap(`Permissions Violation for Publish to ""`), false, false, ""},
		{"other words", wrap(`Permissions Violation for Publish with Reply of "_R_.x"`), false, false, ""},
		{"not a violation", errors.New(`Permissions Violation for Publish to "x"`), false, false, ""},
		{"nil", nil, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, sub, subject := nats.ParseViolation(tc.err)
			if ok != tc.ok || sub != tc.sub || subject != tc.subject {
				t.Fatalf("ParseViolation(%v) = %v, %v, %q; want %v, %v, %q", tc.err, ok, sub, subject, tc.ok, tc.sub, tc.subject)
			}
		})
	}
}
