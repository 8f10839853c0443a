package nsq_test

import (
	"log/slog"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// The fakes: brokers in the test process that misbehave on purpose (publishertest.Misbehaviours).
// Against each, no publisher acknowledges what the fake did not store.

// nsqInOrder is why NSQ cannot be held to the misbehaviours that answer a command in flight.
const nsqInOrder = "NSQ answers in order and without ids: an OK for a command in flight (written, not yet " +
	"read by nsqd) cannot be told from its own answer; answers with nothing outstanding or to commands not " +
	"yet written are caught (the other cases, and publishers/wire's tests)"

// fakeTarget is the publisher against the fake nsqd.
func fakeTarget() publishertest.FakeTarget {
	return publishertest.FakeTarget{Broker: nsq.Broker.Name, Fake: startFake, Open: func(addrs []string, log *slog.Logger) (publishers.Publisher, error) {
		c := nsq.DefaultConfig()
		c.Hosts = addrs
		return nsq.New(c, log)
	}, Features: publishertest.FakeFeatures{
		Skip: map[publishertest.Misbehaviour]string{
			publishertest.AnswerAhead:   nsqInOrder,
			publishertest.StrayThenDrop: nsqInOrder,
			publishertest.Flood:         nsqInOrder,
		},
		OneAtATime: map[publishertest.Misbehaviour]string{publishertest.Twice: nsqInOrder},
	}}
}

func TestFakes(t *testing.T) { publishertest.RunFakeTarget(t, fakeTarget()) }

func TestProtocolErrorsCountedAndLoggedOnce(t *testing.T) {
	publishertest.RunProtocolErrors(t, fakeTarget())
}

// TestSlowDial: one connection (nsq.producers_per_host), its size probe needed none (the fake announces
// max_msg_size).
func TestSlowDial(t *testing.T) { publishertest.RunSlowDialTarget(t, fakeTarget(), 1) }
