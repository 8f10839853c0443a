package rocketmq_test

import (
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
)

func TestRocketMQConsumerRejectsBadGroup(t *testing.T) {
	cfg := publishers.DefaultRocketMQConfig()
	cfg.NameServers = []string{"127.0.0.1:1"}
	_, err := publishers.NewRocketMQConsumer(cfg, publishers.ConsumerOptions{Group: "bad group"}, nil)
	if err == nil || !strings.Contains(err.Error(), "consumer group") {
		t.Fatalf("NewRocketMQConsumer with a bad group: %v, want an error naming the group", err)
	}
}
