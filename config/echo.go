package config

import (
	"errors"
	"fmt"
)

// Echo configures the round trip: an echo in this process and the ack consumers of /sendRoundTrip.
type Echo struct {
	Enabled   bool     `yaml:"enabled" help:"run an echo in this process: consume echo.topics on every enabled broker and publish each message unchanged to <topic><echo.ack_suffix> on the same broker"`
	RoundTrip bool     `yaml:"roundtrip" help:"consume the ack topics of echo.topics on every enabled broker, so /sendRoundTrip can answer (the echo may run in another mqtarget)"`
	Topics    []string `yaml:"topics" help:"topics the echo consumes and /sendRoundTrip sends to; the first is /sendRoundTrip's default"`
	AckSuffix string   `yaml:"ack_suffix" help:"appended to a topic to name the topic its acks go to"`
	Handoff   string   `yaml:"handoff" help:"how the echo's consumer passes messages to its workers: queue (a bounded queue; the consumer waits while it is full) or direct (the consumer publishes itself when every worker is busy)"`
	Workers   int      `yaml:"workers" help:"the echo's workers, each publishing one ack at a time"`
	// The queue handoff's bounds: a flood on an echo topic must not grow memory without limit.
	QueueMaxMessages int   `yaml:"queue_max_messages" help:"messages the echo's queue (echo.handoff: queue) holds per broker; while it is full the consumer waits and leaves the next message unconfirmed, so the broker's flow control applies"`
	QueueMaxBytes    int64 `yaml:"queue_max_bytes" help:"bytes of messages the echo's queue (echo.handoff: queue) holds per broker; while they would be exceeded the consumer waits (a larger message is queued alone)"`
}

// defaultEcho: on, so /sendRoundTrip answers out of the box, on a topic of its own, so the load on
// topic is never echoed; "_ack" is valid on every broker ('.' is not: some brokers' topics refuse it).
func defaultEcho() Echo {
	// The queue absorbs bursts a few workers cannot ack at once; past 4096 messages or 16 MiB (per
	// broker) the broker holds the rest, so memory stays bounded whatever rate the echo topics get.
	return Echo{Enabled: true, RoundTrip: true, Topics: []string{"mqtarget_roundtrip"}, AckSuffix: "_ack", Handoff: "queue", Workers: 4,
		QueueMaxMessages: 4096, QueueMaxBytes: 16 << 20}
}

// maxEchoWorkers bounds echo.workers: each is a goroutine with a publish in flight. maxEchoQueueBytes
// bounds echo.queue_max_bytes (echo.queue_max_messages: maxCount): more would be a digit too many.
const (
	maxEchoWorkers    = 4096
	maxEchoQueueBytes = 16 << 30
)

func (e Echo) validate() error {
	var errs []error
	if len(e.Topics) == 0 && (e.Enabled || e.RoundTrip) {
		errs = append(errs, errors.New("echo.topics: at least one topic is required with echo.enabled or echo.roundtrip"))
	}
	if len(e.Topics) > maxEchoTopics {
		errs = append(errs, fmt.Errorf("echo.topics: %d topics, at most %d are allowed", len(e.Topics), maxEchoTopics))
	}
	seen := map[string]int{}
	for i, t := range e.Topics {
		if j, dup := seen[t]; dup {
			errs = append(errs, fmt.Errorf("echo.topics[%d]: %q repeats echo.topics[%d]", i, t, j))
		}
		seen[t] = i
	}
	for i, t := range e.Topics {
		if j, ack := seen[t+e.AckSuffix]; ack && e.AckSuffix != "" {
			errs = append(errs, fmt.Errorf("echo.topics[%d]: %q is the ack topic of echo.topics[%d]", j, t+e.AckSuffix, i))
		}
	}
	if e.AckSuffix == "" {
		errs = append(errs, errors.New("echo.ack_suffix: must not be empty (acks would go back to the topic the echo consumes)"))
	}
	if e.Handoff != "queue" && e.Handoff != "direct" {
		errs = append(errs, fmt.Errorf("echo.handoff: must be queue or direct, got %q", e.Handoff))
	}
	if e.Workers < 1 || e.Workers > maxEchoWorkers {
		errs = append(errs, fmt.Errorf("echo.workers: must be 1..%d, got %d", maxEchoWorkers, e.Workers))
	}
	if e.QueueMaxMessages < 1 || e.QueueMaxMessages > maxCount {
		errs = append(errs, fmt.Errorf("echo.queue_max_messages: must be 1..%d, got %d", maxCount, e.QueueMaxMessages))
	}
	if e.QueueMaxBytes < 1 || e.QueueMaxBytes > maxEchoQueueBytes {
		errs = append(errs, fmt.Errorf("echo.queue_max_bytes: must be 1..%d, got %d", int64(maxEchoQueueBytes), e.QueueMaxBytes))
	}
	return errors.Join(errs...)
}

// DefaultTopic is /sendRoundTrip's topic without ?topic=: the first of echo.topics, "" without any.
func (e Echo) DefaultTopic() string {
	if len(e.Topics) == 0 {
		return ""
	}
	return e.Topics[0]
}
