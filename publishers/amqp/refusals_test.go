package amqp

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// TestChannelClosedForPermission: a broker that closes the publishing channel with 403
// ACCESS_REFUSED for a publish the user may not make (RabbitMQ's topic and exchange permissions). The
// publishes in flight within the refusal's scope (the routing key it names; every one when it names
// the exchange) fail as refused with its words, the others as unavailable (the broker may have stored
// them), and the refusal is remembered: a publish in its scope is then refused unsent, one outside it
// goes on. A 403 naming neither is unavailable for all and not remembered.
func TestChannelClosedForPermission(t *testing.T) {
	for _, tc := range []struct {
		name        string
		text        string
		secret      error // what the refused publish gets
		held        error // what the other one in flight gets
		remembered  bool
		otherRefuse bool // a publish to another key is refused unsent after
	}{
		{"topic permission", "ACCESS_REFUSED - access to topic 'secret' in exchange 'amq.topic' in vhost '/' refused for user 'u'", publishers.ErrRejected, publishers.ErrUnavailable, true, false},
		{"exchange permission", "ACCESS_REFUSED - access to exchange 'amq.topic' in vhost '/' refused for user 'u'", publishers.ErrRejected, publishers.ErrRejected, true, true},
		{"another refusal", "ACCESS_REFUSED - operation not permitted", publishers.ErrUnavailable, publishers.ErrUnavailable, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w *fakeConn, ch uint16, tag uint64, p fakePublish) {
				switch {
				case p.key == "secret":
					args := binary.BigEndian.AppendUint16(nil, 403)
					args = shortstr(args, tc.text)
					w.method(ch, 20, 40, binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(args, 60), 40)) // channel.close
				case strings.HasPrefix(p.key, "ok"):
					w.ack(ch, tag, false)
				} // held: never answered
			})
			p, _ := newTestPublisher(t, []string{f.url()}, func(c *Config) { c.Exchange = "amq.topic" })
			if err := p.Publish(ctxT(t, 5*time.Second), 0, "ok-first", []byte("1")); err != nil {
				t.Fatal(err)
			}
			held, secret := make(chan error, 1), make(chan error, 1)
			if err := p.PublishAsync(0, "held", []byte("h"), func(err error) { held <- err }); err != nil {
				t.Fatal(err)
			}
			if err := p.PublishAsync(0, "secret", []byte("s"), func(err error) { secret <- err }); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				ch   chan error
				want error
			}{{"secret", secret, tc.secret}, {"held", held, tc.held}} {
				select {
				case err := <-c.ch:
					if !errors.Is(err, c.want) {
						t.Errorf("%s, in flight at the close: %v, want %v", c.name, err, c.want)
					}
					if errors.Is(err, publishers.ErrRejected) && !strings.Contains(err.Error(), tc.text) {
						t.Errorf("%s: %v, want the broker's words", c.name, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s's done never ran", c.name)
				}
			}
			err := p.Publish(ctxT(t, 5*time.Second), 0, "secret", []byte("again"))
			if unsent := errors.Is(err, publishers.ErrRejected) && strings.Contains(err.Error(), "not sent"); unsent != tc.remembered {
				t.Errorf("secret again: %v; refused unsent: %v, want %v", err, unsent, tc.remembered)
			}
			testErr := func() error { return p.Publish(ctxT(t, 5*time.Second), 0, "ok-other", []byte("2")) }
			err = testErr()
			for deadline := time.Now().Add(5 * time.Second); !tc.otherRefuse && errors.Is(err, publishers.ErrUnavailable) && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond) // the connection the close ended, and the one "secret again" may have cost, being redialled
				err = testErr()
			}
			switch {
			case tc.otherRefuse && (!errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "not sent")):
				t.Errorf("another key with the exchange refused: %v, want refused unsent", err)
			case !tc.otherRefuse && err != nil:
				t.Errorf("another key: %v, want success", err)
			}
		})
	}
}
