package nats_test

import (
	"errors"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// jsBroker counts what servers hold with JetStream itself: the stream's state and its messages read
// back by sequence.
type jsBroker struct {
	addrs   []string
	stream  string                      // "": one stream per topic
	proxies []*publishertest.StallProxy // what the publishers dial, one per server: FreezeHost stalls it
}

func (b jsBroker) FreezeHost(_ testing.TB, host int) { b.proxies[host].Stall(true) }
func (b jsBroker) ThawHost(_ testing.TB, host int)   { b.proxies[host].Stall(false) }

func (b jsBroker) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	nc, err := natsgo.Connect("nats://" + b.addrs[host])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := b.stream
	if name == "" {
		name = nats.StreamName(topic)
	}
	var out [][]byte
	for end := time.Now().Add(deadline); ; {
		out = readStream(t, js, name, topic)
		if len(out) >= want || time.Now().After(end) {
			return out
		}
		time.Sleep(50 * time.Millisecond) // polling the broker's state, bounded by deadline
	}
}

// readStream returns every message of stream on subject, in stream order (none when there is no stream).
func readStream(t testing.TB, js jetstream.JetStream, stream, subject string) [][]byte {
	s, err := js.Stream(ctx(t), stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx(t), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject == subject {
			out = append(out, m.Data)
		}
	}
	return out
}

// TestConformanceEmbedded runs the suite against two embedded servers, per-topic streams and one named
// stream.
func TestConformanceEmbedded(t *testing.T) {
	for _, tc := range []struct{ name, stream string }{{"stream per topic", ""}, {"named stream", "CONFORMANCE"}} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := nats.StartEmbedded(2, nats.EmbeddedOptions{MaxStore: 64 << 20, MaxPayload: 64 << 10}, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			small := "rejected.small"
			makeStream(t, e.Addrs()[0], jetstream.StreamConfig{Name: nats.StreamName(small), Subjects: []string{small}, MaxMsgSize: 16})
			// a stream full with discard new refuses every message: its PubAck carries the error
			full := "rejected.full"
			makeStream(t, e.Addrs()[0], jetstream.StreamConfig{Name: nats.StreamName(full), Subjects: []string{full}, MaxMsgs: 1, Discard: jetstream.DiscardNew})
			fillStream(t, e.Addrs()[0], full)
			// The embedded servers run in the test process, where a SIGSTOP would stop the test too: the
			// publishers dial them through proxies that stall on FreezeHost.
			b := jsBroker{addrs: e.Addrs(), stream: tc.stream}
			var dial []string
			for _, a := range e.Addrs() {
				px := publishertest.StartStallProxy(t, a, 0)
				b.proxies = append(b.proxies, px)
				dial = append(dial, px.Addr())
			}
			f := publishertest.Features{
				AsyncTimeout:     nats.AsyncMaxWait,
				NoLogin:          "the embedded servers take every client (TestLogin refuses one on a server of its own)",
				IgnoreGoroutines: embeddedServer(),
				Rejections: []publishertest.Rejection{
					{Name: "over max_payload", Topic: "rejected.big", Body: make([]byte, 100<<10), Kind: publishers.ErrTooLarge},
				},
			}
			if tc.stream == "" {
				f.Rejections = append(f.Rejections,
					publishertest.Rejection{Name: "over the stream's max_msg_size", Topic: small, Body: make([]byte, 100)},
					publishertest.Rejection{Name: "a full stream (discard new)", Topic: full, Body: []byte("x")})
			}
			publishertest.Run(t, f, b, func(t testing.TB) publishers.Publisher {
				c := nats.DefaultConfig()
				c.Servers = dial
				c.Stream = tc.stream
				p, err := nats.New(c, publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}

// makeStream creates a stream on the server at addr.
func makeStream(t testing.TB, addr string, cfg jetstream.StreamConfig) {
	t.Helper()
	if _, err := jetStream(t, addr).CreateStream(ctx(t), cfg); err != nil {
		t.Fatal(err)
	}
}

// fillStream publishes one message to subject on the server at addr, acknowledged.
func fillStream(t testing.TB, addr, subject string) {
	t.Helper()
	if _, err := jetStream(t, addr).Publish(ctx(t), subject, []byte("fill")); err != nil {
		t.Fatal(err)
	}
}

// jetStream is a JetStream client of the server at addr, on a connection closed at the test's end.
func jetStream(t testing.TB, addr string) jetstream.JetStream {
	t.Helper()
	nc, err := natsgo.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// embeddedServer returns options ignoring the goroutines of nats-servers running in the test process:
// a stream's loops start with the stream (the first publish to a topic), and a client connection's
// loops end some time after the client left.
func embeddedServer() []goleak.Option {
	var o []goleak.Option
	for _, f := range []string{
		"(*stream).internalLoop", "(*stream).signalConsumersLoop", "(*fileStore).flushStreamStateLoop",
		"(*client).readLoop", "(*client).writeLoop", "(*fileStore).syncBlocks", "(*consumer).processInboundAcks",
		"(*consumer).loopAndGatherMsgs", "(*consumer).processInboundNextMsgReqs", "(*stream).processInboundJetStreamMsg",
	} {
		o = append(o, goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server."+f))
	}
	return o
}
