package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/mqtarget/mqtarget/publishers"
)

// prefetch is how many unacked messages the broker may send each consumer connection.
const prefetch = 256

// Consumer reads queues from every configured server (see doc.go).
type Consumer struct {
	cfg     Config
	servers []server
	names   []string
	p       *Publisher // its dial path (TLS, handshake, deadlines), never its publishing
	log     *slog.Logger

	scope *publishers.Scope // running Consume calls
}

// NewConsumer creates the consumer; it connects when Consume is called. o.Group is not used: the
// consumers of a queue share its messages.
func NewConsumer(c Config, _ publishers.ConsumerOptions, log *slog.Logger) (*Consumer, error) {
	p, err := New(c, log)
	if err != nil {
		return nil, err
	}
	cs := &Consumer{cfg: c, p: p, names: p.names, log: p.log, scope: publishers.NewScope()}
	for _, h := range p.hosts {
		cs.servers = append(cs.servers, h.srv)
	}
	return cs, nil
}

// Hosts implements publishers.Consumer.
func (c *Consumer) Hosts() []string { return c.names }

// Close implements publishers.Consumer: it ends every running Consume and waits for them; idempotent.
func (c *Consumer) Close() error {
	c.scope.Close()
	return c.p.Close()
}

// Consume implements publishers.Consumer: it subscribes to queue topic on every host (declared first,
// as the publisher declares it) and calls handle for each message, acking it once handle returned. A
// host that cannot be subscribed to at the start fails the call; a connection that breaks later is
// redialled with the shared backoff.
func (c *Consumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if err := ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", publishers.ErrBadTopic, err)
	}
	ctx, leave, err := c.scope.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()

	sessions := make([]*session, len(c.servers))
	var errs []error
	for i := range c.servers {
		s, err := c.subscribe(ctx, i, topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("amqp: subscribing to %s on %s: %w", topic, c.names[i], err))
			continue
		}
		sessions[i] = s
	}
	if err := errors.Join(errs...); err != nil {
		for _, s := range sessions {
			if s != nil {
				s.close()
			}
		}
		if publishers.Ended(ctx) {
			return nil // ended (its context, Close) while subscribing: as if a moment later
		}
		return err
	}
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() { c.run(ctx, i, topic, s, handle) })
	}
	wg.Wait()
	return nil
}

// session is one host's consuming connection.
type session struct {
	conn       *amqp091.Connection
	raw        net.Conn
	deliveries <-chan amqp091.Delivery
	born       time.Time
}

// close says goodbye for at most closeWait: the socket is closed then, as the library's heartbeater
// keeps pushing the close's read deadline forward while the broker heartbeats (see link.shutdown).
func (s *session) close() {
	cut := time.AfterFunc(closeWait, func() { s.raw.Close() })
	_ = s.conn.CloseDeadline(time.Now().Add(closeWait))
	cut.Stop()
	_ = s.raw.Close()
}

// subscribe connects to host i, declares the queue and starts consuming it, within dial_timeout.
func (c *Consumer) subscribe(ctx context.Context, i int, topic string) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	conn, raw, err := c.p.handshake(ctx, c.p.hosts[i], nil)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	s := &session{conn: conn, raw: raw, born: time.Now()}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Qos(prefetch, 0, false)
	}
	if err == nil {
		_, err = ch.QueueDeclare(topic, c.cfg.Durable, false, false, false, nil)
	}
	if err == nil && c.cfg.Exchange != "" {
		err = ch.QueueBind(topic, topic, c.cfg.Exchange, false, nil)
	}
	if err == nil {
		s.deliveries, err = ch.Consume(topic, "", false, false, false, false, nil)
	}
	if err == nil && !stop() {
		err = errors.New("set-up not done within amqp.dial_timeout")
	}
	if err != nil {
		s.close()
		var ae *amqp091.Error
		if errors.As(err, &ae) && ae.Server {
			return nil, wrap(publishers.ErrRejected, fmt.Errorf("%d %s", ae.Code, ae.Reason))
		}
		return nil, wrap(publishers.ErrUnavailable, err)
	}
	return s, nil
}

// run delivers host i's messages until ctx ends, resubscribing with backoff when the connection breaks.
func (c *Consumer) run(ctx context.Context, i int, topic string, s *session, handle func(publishers.Delivery)) {
	var r publishers.Redial
	b := c.p.backoff
	for {
		c.deliver(ctx, i, topic, s, handle)
		s.close()
		if ctx.Err() != nil {
			return
		}
		wait := r.Lost(b, time.Now(), time.Since(s.born), true, errors.New("consumer connection lost"))
		for {
			if !sleep(ctx, wait) {
				return
			}
			var err error
			if s, err = c.subscribe(ctx, i, topic); err == nil {
				break
			}
			wait = r.Failed(b, time.Now(), err)
			c.log.Warn("AMQP consumer cannot resubscribe", "host", c.names[i], "topic", topic, "err", err, "next_try_in", wait.Round(time.Millisecond))
		}
	}
}

// deliver hands s's messages to handle until the connection ends or ctx does.
func (c *Consumer) deliver(ctx context.Context, i int, topic string, s *session, handle func(publishers.Delivery)) {
	for {
		select {
		case <-ctx.Done():
			return
		case d, ok := <-s.deliveries:
			if !ok {
				return
			}
			handle(publishers.Delivery{Host: i, Topic: topic, Body: d.Body, Received: time.Now()})
			if err := d.Ack(false); err != nil {
				return
			}
		}
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
