package nsq_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// Secrets the test's auth server knows: one may publish and subscribe to authTopic* topics, one has no
// authorizations at all; any other is refused.
const (
	goodSecret  = "s3cret-publisher"
	emptySecret = "s3cret-nothing"
	authTopic   = "auth_ok_"
)

// TestIntegrationAuth: an nsqd started with --auth-http-address (its auth server in the test process).
// With nsq.auth_secret the publisher and the consumer AUTH after IDENTIFY, publish and consume what the
// secret allows, and nsqd holds exactly what was acknowledged; a topic the secret may not publish to
// is a message's refusal (502) and publishing goes on. A secret nsqd refuses, one without
// authorizations, or none at all is a refused connection (503) naming the reason, never the secret.
func TestIntegrationAuth(t *testing.T) {
	bin := itest.NSQDBin(t)
	authd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var authz []map[string]any
		switch r.URL.Query().Get("secret") {
		case goodSecret:
			authz = []map[string]any{{"topic": "^" + authTopic, "channels": []string{".*"}, "permissions": []string{"publish", "subscribe"}}}
		case emptySecret:
			authz = []map[string]any{}
		default:
			http.Error(w, "unknown secret", http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ttl": 3600, "identity": "loadtest", "authorizations": authz})
	}))
	t.Cleanup(authd.Close)
	proc := itest.StartNSQDProc(t, bin, "-auth-http-address", strings.TrimPrefix(authd.URL, "http://"))
	h := &itest.NSQ{TCP: []string{proc.TCPAddr}, HTTP: []string{proc.HTTPAddr}, AuthSecret: goodSecret}
	newPublisher := func(t *testing.T, secret string) *nsq.Publisher {
		c := nsq.DefaultConfig()
		c.Hosts = h.TCP
		c.AuthSecret = publishers.Secret(secret)
		p, err := nsq.New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	ctx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("allowed", func(t *testing.T) {
		p := newPublisher(t, goodSecret)
		topic := authTopic + strings.ReplaceAll(t.Name(), "/", "_")
		for _, body := range []string{"one", "two"} {
			if err := p.Publish(ctx(t), 0, topic, []byte(body)); err != nil {
				t.Fatalf("Publish: %v", err)
			}
		}
		if err := p.PublishBatch(ctx(t), 0, topic, [][]byte{[]byte("three"), []byte("four")}); err != nil {
			t.Fatalf("PublishBatch: %v", err)
		}
		// Not this secret's topic: nsqd refuses the PUB (E_UNAUTHORIZED) and closes the connection.
		err := p.Publish(ctx(t), 0, "forbidden_topic", []byte("refused"))
		if !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "E_UNAUTHORIZED") {
			t.Fatalf("Publish to a topic the secret may not publish to: %v, want ErrRejected naming E_UNAUTHORIZED", err)
		}
		// Remembered: refused again without being sent (nsqd would close another connection), each way.
		for what, err := range map[string]error{
			"Publish":      p.Publish(ctx(t), 0, "forbidden_topic", []byte("refused")),
			"PublishBatch": p.PublishBatch(ctx(t), 0, "forbidden_topic", [][]byte{[]byte("a"), []byte("b")}),
			"PublishAsync": p.PublishAsync(0, "forbidden_topic", []byte("refused"), func(error) { t.Error("PublishAsync's done ran for a refusal") }),
		} {
			if !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "not sent") || !strings.Contains(err.Error(), "E_UNAUTHORIZED") {
				t.Errorf("%s to the refused topic again: %v, want ErrRejected, not sent, naming E_UNAUTHORIZED", what, err)
			}
		}
		// The connection nsqd closed is replaced.
		testwait.Until(t, 5*time.Second, "a publish after the refusal", func() error { return p.Publish(ctx(t), 0, topic, []byte("five")) })
		if err := p.Ping(ctx(t), 0); err != nil {
			t.Errorf("Ping: %v", err)
		}
		got := h.Consume(t, 0, topic, 5, 10*time.Second) // the consumer AUTHs with the same secret
		if len(got) != 5 || h.Stored(t, 0, topic) != 5 {
			t.Errorf("consumed %d, nsqd took %d; want the 5 acknowledged", len(got), h.Stored(t, 0, topic))
		}
		if n := h.Stored(t, 0, "forbidden_topic"); n != 0 {
			t.Errorf("nsqd took %d messages on the forbidden topic", n)
		}
	})
	for _, tc := range []struct{ name, secret, reason string }{
		{"wrong secret", "not-the-secret", "E_AUTH_FAILED"},
		{"no authorizations", emptySecret, "E_UNAUTHORIZED"},
		{"no secret", "", "set nsq.auth_secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPublisher(t, tc.secret)
			for range 2 { // the first dials, the second finds the host failing
				err := p.Publish(ctx(t), 0, authTopic+"refused", []byte("x"))
				if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("Publish: %v, want ErrUnavailable naming %s", err, tc.reason)
				}
				if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
					t.Fatalf("Publish: the secret is shown: %v", err)
				}
			}
			if err := p.Ping(ctx(t), 0); !errors.Is(err, publishers.ErrUnavailable) {
				t.Errorf("Ping: %v, want ErrUnavailable", err)
			}
			c := nsq.DefaultConfig()
			c.Hosts = h.TCP
			c.AuthSecret = publishers.Secret(tc.secret)
			cons, err := nsq.NewConsumer(c, publishers.ConsumerOptions{Group: "itest"}, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			err = cons.Consume(ctx(t), authTopic+"refused", func(publishers.Delivery) {})
			if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Consume: %v, want ErrUnavailable naming %s", err, tc.reason)
			}
			if n := h.Stored(t, 0, authTopic+"refused"); n != 0 {
				t.Errorf("nsqd took %d messages", n)
			}
		})
	}
}
