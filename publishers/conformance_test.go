package publishers_test

import (
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// The conformance suite against the real brokers (nsqd processes, Artemis, RocketMQ) runs in
// internal/itest/conformance_test.go, serialised with the other tests that stop and freeze them.

// TestConformanceEmbeddedSTOMP runs the suite against the embedded go-stomp servers (no integration
// environment needed: they run in the test process).
func TestConformanceEmbeddedSTOMP(t *testing.T) {
	srv, err := stomp.StartServer(2, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h := &itest.STOMP{Addrs: srv.Addrs()}
	f := publishertest.Features{
		NoFreeze: "the go-stomp server runs in the test process, a SIGSTOP would stop the test too " +
			"(the suite's own test stalls it through a proxy)",
		NoReject: "go-stomp v3.1.3 accepts every SEND; it answers ERROR only to protocol and transaction misuse, " +
			"which the Publisher interface cannot produce",
		IgnoreGoroutines: publishertest.GoSTOMPServer(),
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		c := stomp.DefaultConfig()
		c.Hosts = h.Addrs
		p, err := stomp.New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// The fakes: brokers in the test process that misbehave on purpose (publishertest.Misbehaviours).
// Against each, no publisher acknowledges what the fake did not store.

// nsqInOrder is why NSQ cannot be held to the misbehaviours that answer a command in flight.
const nsqInOrder = "NSQ answers in order and without ids: an OK for a command in flight (written, not yet " +
	"read by nsqd) cannot be told from its own answer; answers with nothing outstanding or to commands not " +
	"yet written are caught (the other cases, and publishers/wire's tests)"

// rmqGuessed is why rocketmq-client-go (rocketmq.client: library) is not held to the misbehaviours that
// name a guessed opaque: it reads its answers itself, takes a response for any pending request, and
// numbers requests with a process-wide counter (against the flood fake 17 of 92 publishes were
// acknowledged with nothing stored). mqtarget cannot fix that; rocketmq.client: native, the default,
// checks every answer.
const rmqGuessed = "rocketmq-client-go takes a response with any pending opaque, and its opaques are a " +
	"process-wide counter: a broker naming the next one is believed (not fixable in mqtarget; use " +
	"rocketmq.client: native)"

// fakeTarget is a publisher and the fake broker it runs against.
type fakeTarget struct {
	name, broker string
	fake         func(testing.TB, publishertest.Misbehaviour) publishertest.Fake
	open         func(addrs []string, log *slog.Logger) (publishers.Publisher, error)
	f            publishertest.FakeFeatures
}

func fakeTargets() []fakeTarget {
	rocketmq := func(client string) func([]string, *slog.Logger) (publishers.Publisher, error) {
		return func(addrs []string, log *slog.Logger) (publishers.Publisher, error) {
			c := rocketmq.DefaultConfig()
			c.Client = client
			c.NameServers = addrs
			c.SendTimeout = time.Second
			return rocketmq.New(c, nil, log)
		}
	}
	return []fakeTarget{
		{"nsq", "nsq", publishertest.FakeNSQD, func(addrs []string, log *slog.Logger) (publishers.Publisher, error) {
			c := nsq.DefaultConfig()
			c.Hosts = addrs
			return nsq.New(c, log)
		}, publishertest.FakeFeatures{
			Skip: map[publishertest.Misbehaviour]string{
				publishertest.AnswerAhead:   nsqInOrder,
				publishertest.StrayThenDrop: nsqInOrder,
				publishertest.Flood:         nsqInOrder,
			},
			OneAtATime: map[publishertest.Misbehaviour]string{publishertest.Twice: nsqInOrder},
		}},
		{"stomp", "stomp", publishertest.FakeSTOMP, func(addrs []string, log *slog.Logger) (publishers.Publisher, error) {
			c := stomp.DefaultConfig()
			c.Hosts = addrs
			return stomp.New(c, log)
		}, publishertest.FakeFeatures{}},
		{"rocketmq native", "rocketmq", publishertest.FakeRocketMQ, rocketmq(rocketmq.ClientNative), publishertest.FakeFeatures{}},
		{"rocketmq library", "rocketmq", publishertest.FakeRocketMQ, rocketmq(rocketmq.ClientLibrary), publishertest.FakeFeatures{
			Skip:             map[publishertest.Misbehaviour]string{publishertest.Flood: rmqGuessed, publishertest.StrayThenDrop: rmqGuessed},
			NoProtocolErrors: "rocketmq-client-go reads the answers",
			Few:              true, // every failed publish waits for the 1 s send timeout
			// As in internal/itest's conformance run: rmqClient.Start's scheduled tasks sleep 10 s before
			// they notice a Shutdown.
			IgnoreGoroutines: []goleak.Option{
				goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.1"),
				goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.4"),
			},
		}},
	}
}

func TestFakes(t *testing.T) {
	for _, ft := range fakeTargets() {
		t.Run(ft.name, func(t *testing.T) {
			publishertest.RunFakes(t, ft.f, ft.fake, func(t testing.TB, fake publishertest.Fake) publishers.Publisher {
				p, err := ft.open(fake.Addrs(), publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}
