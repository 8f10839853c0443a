package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqtarget/mqtarget/internal/lograte"
	"github.com/mqtarget/mqtarget/publishers"
)

// Consumer subscribes to a topic on every configured server (publishers.Consumer). Each Consume holds
// one connection per server, clean start, subscribed at mqtt.qos (QoS 1 and 2 messages are acknowledged
// once handle returned). An MQTT broker keeps nothing for a subscription that is not connected: what is
// published while a connection is down is not delivered to it. ConsumerOptions.Group is not used.
type Consumer struct {
	d     *dialer
	addrs []string
	log   *slog.Logger

	scope *publishers.Scope // running Consume calls
	seq   atomic.Uint64     // Consume calls: each has client ids of its own, which two would take from each other
}

// NewConsumer creates the consumer; it connects when Consume is called.
func NewConsumer(c Config, _ publishers.ConsumerOptions, log *slog.Logger) (*Consumer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = lograte.Logger(log, lograte.New(lograte.Interval))
	d, err := newDialer(c, "sub", log)
	if err != nil {
		return nil, err
	}
	cs := &Consumer{d: d, addrs: c.Servers, log: log}
	cs.scope = publishers.NewScope()
	return cs, nil
}

// Hosts implements publishers.Consumer.
func (c *Consumer) Hosts() []string { return c.addrs }

// Consume implements publishers.Consumer. It returns an error when a server cannot be subscribed to at
// the start; a connection lost later is redialled under publishers.DefaultBackoff and subscribed again.
func (c *Consumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if err := ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", publishers.ErrBadTopic, err)
	}
	ctx, leave, err := c.scope.Enter(ctx)
	if err != nil {
		return err
	}
	defer leave()

	id := c.seq.Add(1)
	sessions := make([]*session, len(c.addrs))
	var errs []error
	for i := range c.addrs {
		s, err := c.subscribe(ctx, i, id, topic, handle)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: mqtt %s: %w", publishers.ErrUnavailable, c.addrs[i], err))
			continue
		}
		sessions[i] = s
	}
	if err := errors.Join(errs...); err != nil {
		for _, s := range sessions {
			if s != nil {
				s.close()
				s.cancel()
			}
		}
		if publishers.Ended(ctx) {
			return nil // ended (its context, Close) while subscribing: as if a moment later
		}
		return err
	}
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() { c.keep(ctx, i, id, s, topic, handle) })
	}
	wg.Wait()
	return nil
}

// subscribe connects to server i and subscribes to topic; the broker's SUBACK must grant it.
func (c *Consumer) subscribe(ctx context.Context, i int, id uint64, topic string, handle func(publishers.Delivery)) (*session, error) {
	s, err := c.d.dial(ctx, c.addrs[i], c.d.clientID(i)+"-"+strconv.FormatUint(id, 10), nil, func(t string, payload []byte) {
		if t == topic { // nothing else is subscribed to; a broker sending it is wrong
			handle(publishers.Delivery{Host: i, Topic: topic, Body: payload, Received: time.Now()})
		}
	}, func(err error) {
		c.log.Warn("mqtt consumer connection lost; redialling", "addr", c.addrs[i], "err", err)
	})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, c.d.cfg.DialTimeout)
	defer cancel()
	code, err := s.link.subscribe(sctx, topic, byte(c.d.cfg.QoS))
	if err == nil && code >= 0x80 {
		err = fmt.Errorf("SUBACK refused the subscription to %q: code 0x%02x", topic, code)
	}
	if err != nil {
		s.close()
		s.cancel()
		return nil, err
	}
	return s, nil
}

// keep holds server i's subscription until ctx ends, redialling it when it breaks.
func (c *Consumer) keep(ctx context.Context, i int, id uint64, s *session, topic string, handle func(publishers.Delivery)) {
	rd := redial{b: publishers.DefaultBackoff()}
	for {
		select {
		case <-ctx.Done():
			s.close()
			s.cancel()
			return
		case <-s.link.done():
			s.cancel()
			s.link.release()
		}
		wait := rd.lost(time.Now(), time.Since(s.born), false, errors.New("lost"))
		for {
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			ns, err := c.subscribe(ctx, i, id, topic, handle)
			if err == nil {
				s = ns
				break
			}
			if ctx.Err() != nil {
				return
			}
			wait = rd.failed(time.Now(), err)
			c.log.Warn("mqtt consumer redial failed", "addr", c.addrs[i], "err", err, "retry_in", wait.Round(time.Millisecond))
		}
	}
}

// Close implements publishers.Consumer: it ends every running Consume and waits for them; idempotent.
func (c *Consumer) Close() error {
	c.scope.Close()
	return nil
}
