package publishers_test

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
)

// TestRocketMQConsumer runs against the cluster of MQTARGET_ROCKETMQ_NAMESRV (scripts/rocketmq.sh: two
// brokers), on a topic created on both.
func TestRocketMQConsumer(t *testing.T) {
	itest.Integration(t)
	ns := os.Getenv("MQTARGET_ROCKETMQ_NAMESRV")
	if ns == "" {
		t.Fatal("MQTARGET_ROCKETMQ_NAMESRV is not set (scripts/rocketmq.sh starts RocketMQ)")
	}
	cfg := publishers.DefaultRocketMQConfig()
	cfg.NameServers = []string{ns}
	cfg.CreateTopics = true
	cfg.Queues = 4
	topic := strings.ReplaceAll(freshTopic("consume"), ".", "_")
	log := slog.New(slog.DiscardHandler)
	pub, err := publishers.NewRocketMQ(cfg, []string{topic}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := publishers.NewRocketMQConsumer(cfg, publishers.ConsumerOptions{Group: "mqtarget-test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	checkConsume(t, pub, cons, topic, 500)
}

func TestRocketMQConsumerRejectsBadGroup(t *testing.T) {
	cfg := publishers.DefaultRocketMQConfig()
	cfg.NameServers = []string{"127.0.0.1:1"}
	_, err := publishers.NewRocketMQConsumer(cfg, publishers.ConsumerOptions{Group: "bad group"}, nil)
	if err == nil || !strings.Contains(err.Error(), "consumer group") {
		t.Fatalf("NewRocketMQConsumer with a bad group: %v, want an error naming the group", err)
	}
}
