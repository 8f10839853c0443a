package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqtarget/mqtarget/publishers"
)

// Bounds of a consumer's fetches.
const (
	consumeMaxBytes          = 16 << 20 // one fetch answer
	consumeMaxPartitionBytes = 1 << 20
	consumeMaxFetches        = 4
)

// Consumer reads topics as a member of a consumer group (ConsumerOptions.Group), from the earliest
// retained record when the group has no committed offset; offsets are committed automatically (every
// 5 s and at Close), so a later Consume of the same group goes on where it left. Delivery.Host is the
// host whose publishes land on the record's partition (its first replica's broker, as Hosts names it).
type Consumer struct {
	cfg   Config
	group string
	log   *slog.Logger
	k     *cluster // the metadata client: Hosts and topic lookups

	mu     sync.Mutex
	closed bool
	root   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewConsumer discovers the cluster's brokers (as New does); each Consume makes its own group client.
func NewConsumer(c Config, o publishers.ConsumerOptions, log *slog.Logger) (*Consumer, error) {
	if o.Group == "" {
		o.Group = publishers.DefaultConsumerGroup
	}
	if len(o.Group) > maxTopicLen || !topicChars.All(o.Group) {
		return nil, fmt.Errorf("%w: %q: a Kafka group here is 1..%d characters of [a-zA-Z0-9._-]", publishers.ErrBadGroup, o.Group, maxTopicLen)
	}
	k, err := newCluster(c, log)
	if err != nil {
		return nil, err
	}
	cs := &Consumer{cfg: c, group: o.Group, log: k.log, k: k}
	cs.root, cs.cancel = context.WithCancel(context.Background())
	return cs, nil
}

// Hosts implements publishers.Consumer: the cluster's brokers in node-id order, as the publisher's.
func (c *Consumer) Hosts() []string { return c.k.hosts }

// Consume implements publishers.Consumer. The topic is created as the publisher would create it when
// it does not exist yet, so publishes that follow land where Delivery.Host says.
func (c *Consumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if err := ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", publishers.ErrBadTopic, err)
	}
	ctx, done, err := c.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	lookup, cancel := context.WithTimeout(ctx, discoverTimeout)
	st, err := c.k.topic(lookup, topic)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	opts, err := c.k.clientOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(consumeMaxBytes),
		kgo.FetchMaxPartitionBytes(consumeMaxPartitionBytes),
		kgo.MaxConcurrentFetches(consumeMaxFetches),
	)...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close() // commits what was polled, leaves the group
	for {
		fs := cl.PollRecords(ctx, 1000)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("kafka: fetch failed", "topic", t, "partition", p, "err", err)
			}
		})
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			h := st.host[r.Partition]
			if h < 0 {
				h = 0
			}
			handle(publishers.Delivery{Host: h, Topic: r.Topic, Body: r.Value, Received: now})
		})
	}
}

// enter registers a Consume call so Close can end it and wait for it.
func (c *Consumer) enter(ctx context.Context) (context.Context, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, publishers.ErrClosed
	}
	c.wg.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(c.root, cancel)
	return ctx, func() { unhook(); cancel(); c.wg.Done() }, nil
}

// Close implements publishers.Consumer: ends every running Consume, waits for them, closes the
// metadata client. Idempotent.
func (c *Consumer) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if first {
		c.k.endLookups()
		c.k.cl.Close()
	}
	return nil
}
