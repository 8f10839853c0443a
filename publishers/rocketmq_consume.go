package publishers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/mqtarget/mqtarget/internal/rmqadmin"
)

// RocketMQConsumer reads topics with rocketmq-client-go push consumers (clustering mode), one per Consume
// call. Hosts are the cluster's brokers as the publisher names them (name@address, sorted by name),
// discovered at creation.
//
// The consumer group of a Consume call is the configured group, "_" and the topic: RocketMQ expects every
// member of a group to subscribe to the same topics, and the group remembers its offsets, so each topic
// gets its own. A group new to the cluster starts at each queue's first message.
type RocketMQConsumer struct {
	cfg     RocketMQConfig
	opts    ConsumerOptions
	log     *slog.Logger
	rlog    *slog.Logger
	brokers []rmqadmin.Broker
	hosts   []string
	scope   *consumeScope
}

// NewRocketMQConsumer discovers the brokers from the name servers; it subscribes in Consume.
func NewRocketMQConsumer(c RocketMQConfig, o ConsumerOptions, log *slog.Logger) (*RocketMQConsumer, error) {
	if err := c.Validate("rocketmq"); err != nil {
		return nil, err
	}
	if len(c.NameServers) == 0 {
		return nil, errors.New("rocketmq.name_servers: at least one name server is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Group == "" {
		o.Group = DefaultConsumerGroup
	}
	if !rmqName.MatchString(o.Group) || len(o.Group) > 127 { // with "_" and a topic of up to 127: at most 255
		return nil, fmt.Errorf("rocketmq consumer group %q: want 1..127 characters of [%%|a-zA-Z0-9_-]", o.Group)
	}
	admin := &rmqadmin.Client{Creds: rmqadmin.Credentials{AccessKey: c.AccessKey, SecretKey: string(c.SecretKey)}}
	ctx, cancel := context.WithTimeout(context.Background(), rmqDiscoverTimeout)
	defer cancel()
	var errs []error
	var brokers []rmqadmin.Broker
	for _, ns := range c.NameServers {
		b, err := admin.Brokers(ctx, ns)
		if err == nil && len(b) > 0 {
			brokers = b
			break
		}
		if err == nil {
			err = rmqadmin.ErrNoBrokers
		}
		errs = append(errs, fmt.Errorf("%s: %w", ns, err))
	}
	if brokers == nil {
		return nil, wrap(ErrUnavailable, fmt.Errorf("rocketmq.name_servers: no brokers found: %w", errors.Join(errs...)))
	}
	r := &RocketMQConsumer{cfg: c, opts: o, log: log, brokers: brokers, scope: newConsumeScope()}
	for _, b := range brokers {
		r.hosts = append(r.hosts, b.String())
	}
	r.rlog = routeRlog(log)
	return r, nil
}

// Hosts implements Consumer.
func (r *RocketMQConsumer) Hosts() []string { return r.hosts }

// Consume implements Consumer.
func (r *RocketMQConsumer) Consume(ctx context.Context, topic string, handle func(Delivery)) error {
	if err := ValidateRocketMQTopic(topic); err != nil {
		return fmt.Errorf("rocketmq topic %q: %w", topic, err)
	}
	ctx, done, err := r.scope.enter(ctx)
	if err != nil {
		return err
	}
	defer done()

	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver(r.cfg.NameServers)),
		consumer.WithGroupName(r.opts.Group + "_" + topic),
		// unique per consumer: the client library shares one client per instance name in a process
		consumer.WithInstance(fmt.Sprintf("mqtarget-consume-%d-%d", os.Getpid(), rmqInstance.Add(1))),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	if r.cfg.AccessKey != "" {
		opts = append(opts, consumer.WithCredentials(primitive.Credentials{AccessKey: r.cfg.AccessKey, SecretKey: string(r.cfg.SecretKey)}))
	}
	pc, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return fmt.Errorf("rocketmq consumer: %w", err)
	}
	host := make(map[string]int, len(r.brokers))
	for i, b := range r.brokers {
		host[b.Name] = i
	}
	err = pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now()
		for _, m := range msgs {
			h := -1
			if m.Queue != nil {
				if i, ok := host[m.Queue.BrokerName]; ok {
					h = i
				}
			}
			handle(Delivery{Host: h, Topic: topic, Body: m.Body, Received: now})
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		_ = pc.Shutdown()
		return fmt.Errorf("rocketmq subscribe %s: %w", topic, err)
	}
	if err := pc.Start(); err != nil {
		_ = pc.Shutdown()
		return wrap(ErrUnavailable, fmt.Errorf("rocketmq.name_servers: consumer start: %w", err))
	}
	<-ctx.Done()
	// Shutdown persists the offsets and waits for the client's pull and consume goroutines.
	if err := pc.Shutdown(); err != nil {
		r.log.Warn("rocketmq consumer shutdown", "topic", topic, "err", err)
	}
	return nil
}

// Close implements Consumer.
func (r *RocketMQConsumer) Close() error {
	r.scope.close()
	rlogTarget.CompareAndSwap(r.rlog, nil)
	return nil
}
