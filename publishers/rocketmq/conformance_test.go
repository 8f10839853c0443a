package rocketmq_test

import (
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// The fakes: brokers in the test process that misbehave on purpose (publishertest.Misbehaviours).
// Against each, no publisher acknowledges what the fake did not store.

// rmqGuessed is why rocketmq-client-go (rocketmq.client: library) is not held to the misbehaviours that
// name a guessed opaque: it reads its answers itself, takes a response for any pending request, and
// numbers requests with a process-wide counter (against the flood fake 17 of 92 publishes were
// acknowledged with nothing stored). mqtarget cannot fix that; rocketmq.client: native, the default,
// checks every answer.
const rmqGuessed = "rocketmq-client-go takes a response with any pending opaque, and its opaques are a " +
	"process-wide counter: a broker naming the next one is believed (not fixable in mqtarget; use " +
	"rocketmq.client: native)"

// fakeTargets are both send paths against the fake name server and broker.
func fakeTargets() map[string]publishertest.FakeTarget {
	open := func(client string) func([]string, *slog.Logger) (publishers.Publisher, error) {
		return func(addrs []string, log *slog.Logger) (publishers.Publisher, error) {
			c := rocketmq.DefaultConfig()
			c.Client = client
			c.NameServers = addrs
			c.SendTimeout = time.Second
			return rocketmq.New(c, nil, log)
		}
	}
	return map[string]publishertest.FakeTarget{
		"native": {Broker: rocketmq.Broker.Name, Fake: startFake, Open: open(rocketmq.ClientNative)},
		"library": {Broker: rocketmq.Broker.Name, Fake: startFake, Open: open(rocketmq.ClientLibrary), Features: publishertest.FakeFeatures{
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
	for _, name := range []string{"native", "library"} {
		t.Run(name, func(t *testing.T) { publishertest.RunFakeTarget(t, fakeTargets()[name]) })
	}
}

func TestProtocolErrorsCountedAndLoggedOnce(t *testing.T) {
	for _, name := range []string{"native", "library"} {
		t.Run(name, func(t *testing.T) { publishertest.RunProtocolErrors(t, fakeTargets()[name]) })
	}
}
