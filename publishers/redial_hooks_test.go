package publishers

import (
	"log/slog"
	"time"
)

// The redial tests reach the policy through these, so that the same tests can be run against code
// without it (where these are no-ops) to see them fail.

func setPoolBackoff[L Link](p *Pool[L], b Backoff) { p.backoff = b }

func setRMQBackoff(n *rmqNative, b Backoff) { n.backoff = b }

// rmqTestLog is what NewRocketMQ makes of its logger.
func rmqTestLog(log *slog.Logger) *slog.Logger { return LimitLog(log) }

func setSTOMPConsumerBackoff(c *STOMPConsumer, b Backoff) { c.backoff = b }

func setRMQConsumerBackoff(r *RocketMQConsumer, b Backoff) { r.backoff = b }

func pingReuseForTest() time.Duration { return pingReuse }
