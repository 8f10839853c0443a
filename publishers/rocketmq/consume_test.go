package rocketmq_test

import (
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

func TestRocketMQConsumerRejectsBadGroup(t *testing.T) {
	cfg := rocketmq.DefaultConfig()
	cfg.NameServers = []string{"127.0.0.1:1"}
	_, err := rocketmq.NewConsumer(cfg, publishers.ConsumerOptions{Group: "bad group"}, nil)
	if err == nil || !strings.Contains(err.Error(), "consumer group") {
		t.Fatalf("NewConsumer with a bad group: %v, want an error naming the group", err)
	}
}
