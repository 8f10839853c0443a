package app

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers"
)

// startRocketMQ publishes to the RocketMQ cluster behind rocketmq.name_servers; RocketMQ is enabled only
// when they are set (there is no embedded RocketMQ). With rocketmq.create_topics, topic and topic2 are
// created on every broker now and other topics before their first message.
func startRocketMQ(_ *App, cfg config.Config, log *slog.Logger) (publishers.Publisher, any, error) {
	c := cfg.RocketMQ
	if len(c.NameServers) == 0 {
		return nil, nil, nil
	}
	var topics []string
	if c.CreateTopics {
		for _, t := range []string{cfg.Topic, cfg.Topic2} {
			if publishers.ValidateRocketMQTopic(t) == nil { // otherwise requests name their topic
				topics = append(topics, t)
			}
		}
	}
	pub, err := publishers.NewRocketMQ(c, topics, log)
	if err != nil {
		return nil, nil, err
	}
	info := map[string]any{"name_servers": c.NameServers, "hosts": pub.Hosts(), "group": c.Group, "create_topics": c.CreateTopics}
	return pub, info, nil
}
