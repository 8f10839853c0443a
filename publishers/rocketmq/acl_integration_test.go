package rocketmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// TestIntegrationACL runs against the RocketMQ with ACL 2.0 that scripts/test.sh starts beside the
// first (scripts/rocketmq.sh's ROCKETMQ_AUTH): both send paths sign what they send, a batch included,
// and the broker holds it; a refused login (a wrong secret, an unknown user, no access key) is 503
// (ErrUnavailable) and stores nothing; a topic the user may not publish to is 502 (ErrRejected); the
// consumer reads with the login and fails at once with a refused one.
func TestIntegrationACL(t *testing.T) {
	testlane.Lock(t, "rocketmq-acl")
	h := itest.NewRocketMQACL(t)
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	user, pass, allowed := "pub"+suffix, "secret-"+suffix, "acl_allowed_"+suffix
	h.AddUser(t, user, pass, allowed)
	config := func(client, key, secret string) rocketmq.Config {
		c := rocketmq.DefaultConfig()
		c.NameServers = []string{h.NameSrv}
		c.Client = client
		c.SendTimeout = 5 * time.Second
		c.AccessKey, c.SecretKey = key, publishers.Secret(secret)
		return c
	}
	open := func(t *testing.T, c rocketmq.Config, topics ...string) publishers.Publisher {
		t.Helper()
		p, err := rocketmq.New(c, topics, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		return c
	}
	// publishAll publishes to topic every way (publishertest.Ways: four messages) and returns their
	// errors by name.
	publishAll := func(t *testing.T, p publishers.Publisher, topic string) map[string]error {
		errs := map[string]error{}
		for _, w := range publishertest.Ways(ctx(t), p, 0, topic, 20*time.Second) {
			errs[w.Name] = w.Publish()
		}
		return errs
	}
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		t.Run(client, func(t *testing.T) {
			t.Run("login", func(t *testing.T) {
				topic := "acl_ok_" + client + suffix
				c := config(client, h.Login.AccessKey, h.Login.SecretKey)
				c.CreateTopics = true // the admin requests are signed too
				p := open(t, c, topic)
				for what, err := range publishAll(t, p, topic) {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
				}
				if n := h.Stored(t, 0, topic); n != 4 {
					t.Errorf("the broker holds %d messages, want the 4 acknowledged", n)
				}
			})
			for _, c := range []struct{ name, key, secret, says string }{
				{"wrong secret", h.Login.AccessKey, h.Login.SecretKey + "-wrong", `refused the login of "` + h.Login.AccessKey + `"`},
				{"unknown user", "nobody" + suffix, "whatever", `refused the login of "nobody`},
				{"no access key", "", "", "set rocketmq.access_key and rocketmq.secret_key"},
			} {
				t.Run(c.name, func(t *testing.T) {
					topic := "acl_refused_" + client + suffix
					p := open(t, config(client, c.key, c.secret))
					for what, err := range publishAll(t, p, topic) {
						if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), c.says) {
							t.Errorf("%s: %v, want ErrUnavailable saying %q", what, err, c.says)
						}
					}
					if err := p.Ping(ctx(t), 0); !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), c.says) {
						t.Errorf("Ping: %v, want ErrUnavailable saying %q", err, c.says)
					}
					if n := h.Stored(t, 0, topic); n != 0 {
						t.Errorf("the broker holds %d messages sent with a refused login", n)
					}
					// rocketmq.create_topics creates the topics at New: it fails, saying why.
					cc := config(client, c.key, c.secret)
					cc.CreateTopics = true
					if p, err := rocketmq.New(cc, []string{topic}, publishertest.Logger(t)); !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), c.says) {
						if p != nil {
							_ = p.Close()
						}
						t.Errorf("New with create_topics: %v, want ErrUnavailable saying %q", err, c.says)
					}
				})
			}
			t.Run("topic not permitted", func(t *testing.T) {
				p := open(t, config(client, user, pass))
				if err := p.Publish(ctx(t), 0, allowed, []byte("allowed")); err != nil {
					t.Fatalf("Publish to %s, which %s may publish to: %v", allowed, user, err)
				}
				topic := "acl_forbidden_" + client + suffix
				for what, err := range publishAll(t, p, topic) {
					if !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "no permission") {
						t.Errorf("%s: %v, want ErrRejected with the broker's words", what, err)
					}
				}
				if n := h.Stored(t, 0, topic); n != 0 {
					t.Errorf("the broker holds %d messages on a topic %s may not publish to", n, user)
				}
			})
		})
	}
	t.Run("consumer", func(t *testing.T) {
		topic := "acl_consume_" + suffix
		p := open(t, config(rocketmq.ClientNative, h.Login.AccessKey, h.Login.SecretKey), topic)
		if err := p.PublishBatch(ctx(t), 0, topic, [][]byte{[]byte("a"), []byte("b")}); err != nil {
			t.Fatal(err)
		}
		if got := h.Consume(t, 0, topic, 2, 20*time.Second); len(got) != 2 {
			t.Errorf("the consumer signing as %s read %d messages, want 2", h.Login.AccessKey, len(got))
		}
		for _, c := range []struct {
			name, key, secret string
			want              error
		}{
			{"wrong secret", h.Login.AccessKey, "wrong", publishers.ErrUnavailable},
			{"may not read", user, pass, publishers.ErrRejected},
		} {
			t.Run(c.name, func(t *testing.T) {
				cons, err := rocketmq.NewConsumer(config(rocketmq.ClientNative, c.key, c.secret), publishers.ConsumerOptions{Group: "acl-test"}, publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				defer cons.Close()
				got := 0
				err = cons.Consume(ctx(t), topic, func(publishers.Delivery) { got++ })
				if !errors.Is(err, c.want) || got != 0 {
					t.Errorf("Consume: %v after %d messages, want %v before any", err, got, c.want)
				}
			})
		}
	})
}
