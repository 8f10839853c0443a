package mqtt

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// mochiGoroutines are the goroutines of the embedded servers the tests run in their process, which a
// leak check of a publisher must not count (they end when the servers close, at the test's end).
func mochiGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/mochi-mqtt/server/v2.(*Server).eventLoop"),
		goleak.IgnoreAnyFunction("github.com/mochi-mqtt/server/v2/listeners.(*Net).Serve"),
		goleak.IgnoreAnyFunction("github.com/mochi-mqtt/server/v2.(*Server).EstablishConnection"),
		goleak.IgnoreAnyFunction("github.com/mochi-mqtt/server/v2.(*Client).WriteLoop"),
		goleak.IgnoreAnyFunction("github.com/mochi-mqtt/server/v2.(*Server).attachClient"),
		goleak.IgnoreAnyFunction("github.com/mochi-mqtt/server/v2.(*Client).Read"),
	}
}

// deniedPrefix starts the topics the test servers refuse to take publishes on.
const deniedPrefix = "denied"

// refusedUser is the user name the test servers refuse at CONNECT (a wrong login).
const refusedUser = "refused"

// denyHook lets every client connect and subscribe but refusedUser, and refuses publishes to
// deniedPrefix topics: a broker's ACL refusing a message, answered with PUBACK (or PUBREC) reason
// 0x87, not authorized.
type denyHook struct{ mochi.HookBase }

func (h *denyHook) ID() string { return "mqtarget-test-deny" }
func (h *denyHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}
func (h *denyHook) OnConnectAuthenticate(_ *mochi.Client, pk packets.Packet) bool {
	return string(pk.Connect.Username) != refusedUser
}
func (h *denyHook) OnACLCheck(_ *mochi.Client, topic string, write bool) bool {
	return !write || !strings.HasPrefix(topic, deniedPrefix)
}

// TestMain fails on any goroutine left running; the RocketMQ client (linked in through publishers)
// starts a cache janitor at package init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// embeddedFor starts n embedded servers for the test; they refuse (PUBACK 0x87) publishes to topics starting with deniedPrefix.
func embeddedFor(t testing.TB, n int) *Embedded {
	t.Helper()
	e, err := startEmbedded(n, EmbeddedOptions{MaxMessageSize: 1 << 20}, func() mochi.Hook { return new(denyHook) }, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// recorder is the broker side of the tests: a subscriber to every topic ("#", QoS 1) on each server,
// started before anything is published (an MQTT broker keeps nothing for a topic nobody subscribes to),
// recording what each server delivers, duplicates included.
type recorder struct {
	mu  sync.Mutex
	got []map[string][][]byte // by host, by topic
	ch  chan struct{}         // a message arrived (buffered 1)
	ss  []*session
}

func newRecorder(t testing.TB, addrs []string) *recorder {
	t.Helper()
	c := DefaultConfig()
	c.Servers = addrs
	d, err := newDialer(c, "recorder", discard())
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{got: make([]map[string][][]byte, len(addrs)), ch: make(chan struct{}, 1)}
	for i, a := range addrs {
		r.got[i] = map[string][][]byte{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := d.dial(ctx, a, d.clientID(i), nil, func(topic string, payload []byte) {
			r.mu.Lock()
			r.got[i][topic] = append(r.got[i][topic], payload)
			r.mu.Unlock()
			select {
			case r.ch <- struct{}{}:
			default:
			}
		}, func(error) {})
		if err != nil {
			cancel()
			t.Fatalf("recorder: %s: %v", a, err)
		}
		code, err := s.link.subscribe(ctx, "#", 1)
		cancel()
		if err != nil || code >= 0x80 {
			t.Fatalf("recorder: subscribe on %s: %v, code 0x%02x", a, err, code)
		}
		r.ss = append(r.ss, s)
	}
	t.Cleanup(r.close)
	return r
}

func (r *recorder) close() {
	for _, s := range r.ss {
		s.close()
		s.cancel()
	}
}

// count is how many messages host delivered on topic so far.
func (r *recorder) count(host int, topic string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got[host][topic])
}

// Consume implements publishertest.Broker: it waits until want messages arrived on topic or deadline
// passed, then until nothing more arrives for quiet (a duplicate or a stray would come right behind).
func (r *recorder) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	const quiet = 300 * time.Millisecond
	end := time.Now().Add(deadline)
	for r.count(host, topic) < want && time.Now().Before(end) {
		select {
		case <-r.ch:
		case <-time.After(time.Until(end)):
		}
	}
	for {
		n := r.count(host, topic)
		select {
		case <-r.ch:
		case <-time.After(quiet):
		}
		if r.count(host, topic) == n {
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.got[host][topic]...)
}

// frozenBroker is the suite's Broker and Freezer over proxies in front of the embedded servers.
type frozenBroker struct {
	*recorder
	proxies []*publishertest.StallProxy
}

func (b *frozenBroker) FreezeHost(_ testing.TB, host int) { b.proxies[host].Stall(true) }
func (b *frozenBroker) ThawHost(_ testing.TB, host int)   { b.proxies[host].Stall(false) }
