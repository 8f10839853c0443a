package amqp

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/rabbitmqctl"
	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestIntegrationPermission: RabbitMQ 3.10.8 refuses a publish for want of permission in three
// places, and each is 502 with its words and then remembered, refused unsent, while permitted topics
// go on and hold exactly what was acknowledged:
//   - a queue the user may not configure: its declaration is refused (403 on a channel of its own);
//   - a routing key a topic permission refuses: RabbitMQ closes the publishing channel (403 access to
//     topic), failing the publishes in flight with that key as refused, the others as unavailable;
//   - an exchange the user may not write to: RabbitMQ closes the publishing channel (403 access to
//     exchange), and every publish is refused.
func TestIntegrationPermission(t *testing.T) {
	testlane.Lock(t, "rabbitmq") // the real brokers other packages stop and freeze too
	urls := integrationURLs(t)
	srv, _ := parse(urls[0])
	user := freshName("mqt-limited-amqp")
	ctl(t, "add_user", user, user)
	t.Cleanup(func() { ctl(t, "delete_user", user) })
	// asUser is urls[0] with user's login.
	asUser := func() string {
		u, err := url.Parse(urls[0])
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, user)
		return u.String()
	}()
	// What each queue must hold, counted with one rabbitmqctl call at the end (each starts an Erlang
	// VM); the queues stay in the test broker, a handful of messages.
	want := map[string]int{}
	for _, tc := range []struct {
		name             string
		configure, write string // user's permission patterns (read: everything)
		topic            bool   // a topic permission on amq.topic allowing mqt-allowed* keys only
		exchange         string // amqp.exchange
		words            string // in the first refusal
		allowedAfter     bool   // a permitted topic goes on
	}{
		{name: "queue not configurable", configure: "^mqt-allowed.*", write: ".*", words: "declaring queue", allowedAfter: true},
		{name: "topic permission", configure: ".*", write: ".*", topic: true, exchange: "amq.topic", words: "access to topic", allowedAfter: true},
		{name: "exchange not writable", configure: ".*", write: "^mqt-allowed.*", words: "access to exchange 'amq.default'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl(t, "set_permissions", "-p", srv.vhost, user, tc.configure, tc.write, ".*")
			if tc.topic {
				// stays for the cases after it, which use amq.default
				ctl(t, "set_topic_permissions", "-p", srv.vhost, user, "amq.topic", "^mqt-allowed.*", ".*")
			}
			allowed, forbidden := freshName("mqt-allowed"), freshName("mqt-forbidden")
			want[forbidden] = 0
			p, _ := newTestPublisher(t, []string{asUser}, func(c *Config) { c.Exchange = tc.exchange })
			acked := 0
			if tc.allowedAfter {
				if err := p.Publish(ctxT(t, 5*time.Second), 0, allowed, []byte("before")); err != nil {
					t.Fatalf("Publish to %s: %v", allowed, err)
				}
				acked++
			}
			for i, way := range publishertest.Ways(ctxT(t, 10*time.Second), p, 0, forbidden, 10*time.Second) {
				err := way.Publish()
				switch {
				case !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "ACCESS_REFUSED"):
					t.Fatalf("%s to %s: %v, want rejected with ACCESS_REFUSED", way.Name, forbidden, err)
				case i == 0 && !strings.Contains(err.Error(), tc.words):
					t.Errorf("the first refusal: %v, want the broker's %q", err, tc.words)
				case i == 0 && strings.Contains(err.Error(), "not sent"):
					t.Errorf("the first refusal: %v, want it sent", err)
				case i > 0 && !strings.Contains(err.Error(), "not sent"):
					t.Errorf("%s: %v, want it refused unsent (remembered)", way.Name, err)
				}
				t.Logf("%s: %v", way.Name, err)
			}
			if tc.allowedAfter {
				// the topic refusal cost the connection, which had answered: redialled at once
				if err := p.Publish(ctxT(t, 5*time.Second), 0, allowed, []byte("after")); err != nil {
					t.Fatalf("Publish to %s after the refusals: %v", allowed, err)
				}
				acked++
				want[allowed] = acked
			} else if err := p.Publish(ctxT(t, 5*time.Second), 0, allowed, []byte("x")); !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "not sent") {
				t.Errorf("Publish to %s with the exchange refused: %v, want refused unsent", allowed, err)
			}
		})
	}
	held, err := rabbitmqctl.Node{}.Queues(srv.vhost)
	if err != nil {
		t.Fatal(err)
	}
	for q, n := range want {
		if held[q] != n { // a queue never made holds nothing
			t.Errorf("%s holds %d messages, %d acknowledged", q, held[q], n)
		}
	}
}
