package app

import (
	"log/slog"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers"
)

// broker starts one broker family's publisher (and embedded brokers, registering their closers on the
// App). It returns a nil publisher when the configuration does not enable that broker, and info to show
// on / as its effective setup.
type broker struct {
	name  string
	start func(a *App, cfg config.Config, log *slog.Logger) (pub publishers.Publisher, info any, err error)
}

// brokers are started in this order; each has its file in this package.
var brokers = []broker{
	{"nsq", startNSQ},
	{"stomp", startSTOMP},
	{"rocketmq", startRocketMQ},
}
