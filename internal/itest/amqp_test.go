package itest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/amqp"
)

// The AMQP 0-9-1 tests run against the RabbitMQ node of scripts/rabbitmq.sh (MQTARGET_AMQP_TEST_URLS,
// two vhosts of it in scripts/test.sh, and RABBITMQ_DATA).

// TestAMQP: every endpoint's ledger (queue.declare passive, and rabbitmqctl once per vhost), bad
// input, the async drain, a frozen node (stopped too with MQTARGET_AMQP_KILL), and /send3Host with two.
func TestAMQP(t *testing.T) {
	Lane(t, "rabbitmq") // the node of TestRabbitMQ (STOMP)
	h := NewAMQP(t)
	RunSuite(t, h)
	t.Run("send3Host with 2 servers", func(t *testing.T) { RunTooFewHosts(t, h, "amqp.urls") })
	t.Run("ledger by rabbitmqctl", func(t *testing.T) { runCtlLedger(t, h) })
}

// TestAMQPFaults freezes the node under load; kills it with -9 only with MQTARGET_AMQP_KILL (the
// restart of the Erlang node takes tens of seconds, and the STOMP tests use it too). RabbitMQ 3.10 may
// lose a durable queue made shortly before a kill -9, with the messages it confirmed (docs/amqp.md):
// a round in which it did (AMQP.TopicDurable, RunFault skips it) is run again on a new queue, up to
// three rounds.
func TestAMQPFaults(t *testing.T) {
	Lane(t, "rabbitmq")
	h := NewAMQP(t)
	for _, f := range Faults {
		t.Run(f.Name, func(t *testing.T) {
			if !f.Crash {
				RunFault(t, h, f)
				return
			}
			h.mayKill(t)
			const rounds = 3
			for round := 1; round <= rounds; round++ {
				lost := false
				t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
					defer func() { lost = t.Skipped() }()
					RunFault(t, h, f)
				})
				if !lost {
					return
				}
			}
			t.Fatalf("in all %d rounds the node lost the durable queue itself", rounds)
		})
	}
}

func TestRoundTripAMQP(t *testing.T) {
	Lane(t, "rabbitmq")
	RunRoundTrip(t, NewAMQP(t))
}

// TestAMQPConsumer: the consumer over both vhosts.
func TestAMQPConsumer(t *testing.T) {
	Lane(t, "rabbitmq")
	h := NewAMQP(t)
	cfg := amqp.DefaultConfig()
	cfg.URLs = h.URLs
	pub, err := amqp.New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := amqp.NewConsumer(cfg, publishers.ConsumerOptions{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	CheckConsume(t, pub, cons, FreshTopic("consume"), 300)
}

// runCtlLedger sends to every endpoint, each on queues of its own, consumes nothing, and asks
// rabbitmqctl (list_queues, once per vhost) what each queue holds: exactly what mqtarget acknowledged
// to that host, and none of those messages on another host.
func runCtlLedger(t *testing.T, h *AMQP) {
	tg := StartTarget(t, h, nil)
	hosts := h.Hosts()
	want := map[key]int{}
	topics := map[string]bool{}
	for _, ep := range []string{"/send1", "/send2", "/send2?mode=sequential", "/send2Topic", "/sendAsync", "/sendAsyncWait", "/send2Host"} {
		topic := uniqueTopic("itctl")
		q := "topic=" + topic
		topics[topic] = true
		if ep == "/send2Topic" {
			topic2 := uniqueTopic("itctl2")
			q += "&topic2=" + topic2
			topics[topic2] = true
		}
		sep := "?"
		if strings.Contains(ep, "?") {
			sep = "&"
		}
		for i := range 6 {
			r := tg.Get(t, ep+sep+q)
			if r.Status/100 != 2 {
				t.Fatalf("%s request %d: %d %s", ep, i, r.Status, r.Error)
			}
			for _, m := range r.Messages {
				want[key{slices.Index(hosts, m.Host), m.Topic}]++
			}
		}
	}
	waitAsyncSettled(t, tg)
	got := make([]map[string]int, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Go(func() { got[i], errs[i] = h.node().Queues(h.vhosts[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for k, n := range want {
		if m, ok := got[k.host][k.topic]; m != n {
			t.Errorf("host %d (%s) queue %s: rabbitmqctl counts %d (listed: %v), %d were acknowledged", k.host, hosts[k.host], k.topic, m, ok, n)
		}
	}
	for i := range hosts {
		for name, n := range got[i] {
			if topics[name] && want[key{i, name}] == 0 && n > 0 {
				t.Errorf("host %d (%s) queue %s holds %d messages, none was acknowledged there", i, hosts[i], name, n)
			}
		}
	}
	t.Logf("rabbitmqctl list_queues: %d queues with acknowledged messages on %d vhosts", len(want), len(hosts))
}
