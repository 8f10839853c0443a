package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqtarget/mqtarget/publishers"
)

// Consumer reads topics from every configured server: with JetStream, a durable consumer named after
// ConsumerOptions.Group on the topic's stream (filtered to the topic), each message acknowledged once
// handle returned, so consumers sharing a group share the messages and what none has read stays in
// the stream; with core NATS, a queue subscription of the group (only what arrives while subscribed).
type Consumer struct {
	hosts     []string
	opts      []nats.Option
	jetstream bool
	stream    string
	group     string
	log       *slog.Logger

	scope *publishers.Scope // running Consume calls
}

// NewConsumer creates the consumer; Consume connects.
func NewConsumer(c Config, o publishers.ConsumerOptions, log *slog.Logger) (*Consumer, error) {
	if err := c.Validate("nats"); err != nil {
		return nil, err
	}
	if len(c.Servers) == 0 {
		return nil, errors.New("nats.servers: at least one server is required")
	}
	if o.Group == "" {
		o.Group = publishers.DefaultConsumerGroup
	}
	if err := validateStreamName(o.Group); err != nil { // a durable consumer's name follows the same rules
		return nil, fmt.Errorf("%w: %w", publishers.ErrBadGroup, err)
	}
	opts, err := c.options()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = publishers.LimitLog(log)
	k := &Consumer{hosts: c.Servers, opts: opts, jetstream: c.JetStream, stream: c.Stream, group: o.Group, log: log}
	k.scope = publishers.NewScope()
	return k, nil
}

// Hosts implements publishers.Consumer.
func (k *Consumer) Hosts() []string { return k.hosts }

// Consume implements publishers.Consumer.
func (k *Consumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if err := ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", publishers.ErrBadTopic, err)
	}
	ctx, leave, err := k.scope.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()

	var subs []func()
	defer func() {
		for _, s := range subs {
			s()
		}
	}()
	refused := make(chan error, len(k.hosts))
	for i, addr := range k.hosts {
		s, err := k.subscribe(ctx, i, addr, topic, handle, refused)
		if err != nil && ctx.Err() != nil {
			// Ended (its context, Close, or a handler that had enough from the hosts before) while
			// subscribing: as if it had ended a moment later, not a broker failure.
			return nil
		}
		if err != nil {
			return err
		}
		subs = append(subs, s)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-refused:
		return err
	}
}

// subscribe starts reading topic from one server; the function it returns stops and waits. A
// permission violation on its connection, while subscribing or after, is sent on refused: the server
// drops what it refuses and keeps the connection, so nothing else would tell.
func (k *Consumer) subscribe(ctx context.Context, host int, addr, topic string, handle func(publishers.Delivery), refused chan<- error) (stop func(), err error) {
	h := &hostConn{host: host, addr: addr}
	ctx, refuse := context.WithCancelCause(ctx)
	h.perms.watch(func(v violation) {
		err := h.consumeRefused(topic, v)
		refuse(err)
		select {
		case refused <- err:
		default:
		}
	})
	defer func() {
		switch {
		case err != nil && ctx.Err() != nil && context.Cause(ctx) != ctx.Err():
			err = context.Cause(ctx) // the refusal, not the request it cut short
			refuse(nil)
		case err != nil:
			refuse(nil)
		default:
			s := stop
			stop = func() { s(); refuse(nil) }
		}
	}()
	opts := append(k.opts[:len(k.opts):len(k.opts)], h.handlers(k.log, "consumer")...)
	opts = append(opts, nats.RetryOnFailedConnect(false))
	nc, err := nats.Connect(serverURL(addr, hasSecure(opts)), opts...)
	if err != nil {
		return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: %w", host, addr, err))
	}
	deliver := func(data []byte) {
		handle(publishers.Delivery{Host: host, Topic: topic, Body: data, Received: time.Now()})
	}
	if !k.jetstream {
		sub, err := nc.QueueSubscribe(topic, k.group, func(m *nats.Msg) { deliver(m.Data) })
		if err == nil {
			err = flush(ctx, nc) // the subscription is in place when Consume runs
		}
		if err != nil {
			nc.Close()
			return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: subscribe %q: %w", host, addr, topic, err))
		}
		return func() { _ = sub.Drain(); nc.Close() }, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, publishers.Wrap(publishers.ErrUnavailable, err)
	}
	stream := k.stream
	if stream == "" {
		stream = StreamName(topic)
	}
	if _, err := js.Stream(ctx, stream); errors.Is(err, jetstream.ErrStreamNotFound) && k.stream == "" {
		// Nothing published yet: make the topic's stream as the publisher would, so a consumer can
		// start first (the round trip's echo does).
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{topic}, Storage: jetstream.FileStorage, AllowAtomicPublish: true})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			nc.Close()
			return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: stream %q: %w", host, addr, stream, err))
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       strings.NewReplacer(".", "_").Replace(k.group),
		FilterSubject: topic,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		nc.Close()
		return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: consumer %q on stream %q: %w", host, addr, k.group, stream, err))
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		deliver(m.Data())
		_ = m.Ack()
	})
	if err != nil {
		nc.Close()
		return nil, publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: consume %q: %w", host, addr, topic, err))
	}
	return func() {
		cc.Stop()
		<-cc.Closed()
		nc.Close()
	}, nil
}

// Close ends every running Consume and waits for them; it is idempotent.
func (k *Consumer) Close() error {
	k.scope.Close()
	return nil
}

// consumeRefused is Consume's error when the server refuses what v names: unavailable when it is
// where JetStream's answers come (_INBOX), else rejected (the topic, its stream's API, its acks).
func (h *hostConn) consumeRefused(topic string, v violation) error {
	what := "publish to"
	if v.subscribe {
		what = "subscription to"
	}
	err := fmt.Errorf("nats.servers[%d] %s: consume %q: the server refused the %s %q: permissions violation", h.host, h.addr, topic, what, v.subject)
	if v.subscribe && strings.HasPrefix(v.subject, "_INBOX.") {
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("%w (let the user subscribe to _INBOX.>)", err))
	}
	return publishers.Wrap(publishers.ErrRejected, err)
}
