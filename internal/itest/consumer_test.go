package itest

import (
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// The consumers against real brokers. They live in this package, not beside the consumers, because its
// tests run one after the other: others here stop and freeze the same brokers.

// TestNSQConsumer: two real nsqd processes.
func TestNSQConsumer(t *testing.T) {
	Lane(t, "nsq")
	bin := NSQDBin(t)
	a, b := StartNSQDProc(t, bin), StartNSQDProc(t, bin)
	cfg := nsq.DefaultConfig()
	cfg.Hosts = []string{a.TCPAddr, b.TCPAddr}
	pub, err := nsq.New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := nsq.NewConsumer(cfg, publishers.ConsumerOptions{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	CheckConsume(t, pub, cons, FreshTopic("consume"), 1000)
}

// TestArtemisConsumer: persistent messages through Artemis.
func TestArtemisConsumer(t *testing.T) {
	Lane(t, "artemis")
	addr, login, pass, _ := RealBroker(t, "artemis", "ARTEMIS")
	cfg := stomp.DefaultConfig()
	cfg.Hosts = []string{addr}
	cfg.Login, cfg.Passcode, cfg.Persistent = login, publishers.Secret(pass), true
	// The pool opens connections as publishes need them; a new-machine CI run's Artemis (cold, two cores
	// shared with every other broker) took past 5 s to send CONNECTED to the second.
	cfg.DialTimeout = 15 * time.Second
	pub, err := stomp.New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := stomp.NewConsumer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	CheckConsume(t, pub, cons, FreshTopic("consume"), 1000)
}

// TestRocketMQConsumer: the two-broker cluster of scripts/rocketmq.sh, on a topic created on both.
func TestRocketMQConsumer(t *testing.T) {
	Lane(t, "rocketmq")
	cfg := rocketmq.DefaultConfig()
	cfg.NameServers = []string{RocketMQNamesrv(t)}
	cfg.CreateTopics = true
	cfg.Queues = RocketMQQueues
	topic := strings.ReplaceAll(FreshTopic("consume"), ".", "_")
	pub, err := rocketmq.New(cfg, []string{topic}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := rocketmq.NewConsumer(cfg, publishers.ConsumerOptions{Group: "mqtarget-test"}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	CheckConsume(t, pub, cons, topic, 500)
}
