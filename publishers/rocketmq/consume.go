package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

// Consumer reads topics by pulling every queue of every broker of the cluster (one goroutine per
// broker and Consume call) with rmqadmin's PULL_MESSAGE, from each queue's first retained message, and
// commits no offsets: a Consume sees everything the cluster holds of the topic and what arrives while it
// runs, which is what counting a test run's delivery needs. Hosts are the brokers as the publisher names
// them (name@address, sorted by name), discovered at creation.
//
// rocketmq-client-go's push consumer is not used: its Shutdown races with its own rebalancing (a data
// race under -race in v2.1.3-0.20251226070945), it hands queues out only after a rebalance round, and its
// consumer group commits offsets, so a second run would not see the first run's messages.
type Consumer struct {
	cfg     Config
	opts    publishers.ConsumerOptions
	log     *slog.Logger
	admin   *admin.Client
	brokers []admin.Broker
	hosts   []string
	scope   *publishers.Scope
	backoff publishers.Backoff // the pause after a round that failed (the redial policy)
}

// Pulling: messages per request, how often a broker's route (its queue count) is refreshed, and the
// pause between rounds that found nothing, doubling up to the maximum while the topic stays idle.
const (
	rmqPullBatch       = 32
	rmqRouteRefresh    = time.Second
	rmqPullIdleMin     = 5 * time.Millisecond
	rmqPullIdleMax     = 200 * time.Millisecond
	rmqPullCallTimeout = 5 * time.Second
)

// NewConsumer discovers the brokers from the name servers; it subscribes in Consume.
func NewConsumer(c Config, o publishers.ConsumerOptions, log *slog.Logger) (*Consumer, error) {
	if err := c.Validate("rocketmq"); err != nil {
		return nil, err
	}
	if len(c.NameServers) == 0 {
		return nil, errors.New("rocketmq.name_servers: at least one name server is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = publishers.LimitLog(log)
	if o.Group == "" {
		o.Group = publishers.DefaultConsumerGroup
	}
	if !rmqName.All(o.Group) || len(o.Group) > 255 {
		return nil, publishers.Wrap(publishers.ErrBadGroup, fmt.Errorf("rocketmq consumer group %q: want 1..255 characters of [%%|a-zA-Z0-9_-]", o.Group))
	}
	adm, err := newRMQAdmin(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rmqDiscoverTimeout)
	defer cancel()
	brokers, err := discoverBrokers(ctx, adm, c.NameServers)
	if err != nil {
		return nil, publishers.Wrap(publishers.ErrUnavailable, err)
	}
	r := &Consumer{cfg: c, opts: o, log: log, admin: adm, brokers: brokers, scope: publishers.NewScope(), backoff: publishers.DefaultBackoff()}
	for _, b := range brokers {
		r.hosts = append(r.hosts, b.String())
	}
	return r, nil
}

// Hosts implements Consumer.
func (r *Consumer) Hosts() []string { return r.hosts }

// Consume implements Consumer. A topic that does not exist yet is waited for.
func (r *Consumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if err := ValidateTopic(topic); err != nil {
		return publishers.Wrap(publishers.ErrBadTopic, fmt.Errorf("rocketmq topic %q: %w", topic, err))
	}
	ctx, done, err := r.scope.Enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if _, err := r.route(ctx, topic); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("rocketmq.name_servers: route of %s: %w", topic, err))
	}
	if err := r.checkLogin(ctx); err != nil {
		return err
	}
	// A pull the broker refuses for want of permission ends the whole subscription: it refuses the
	// next ones alike, and a consumer that only logs would count nothing and look idle.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		once    sync.Once
		refusal error
	)
	for i, b := range r.brokers {
		wg.Go(func() {
			if err := r.pullBroker(ctx, i, b, topic, handle); err != nil {
				once.Do(func() { refusal = err; cancel() })
			}
		})
	}
	wg.Wait()
	return refusal
}

// checkLogin asks every broker for its version, a request each signs and authenticates: a broker with
// ACL that refuses the login fails Consume at once (ErrUnavailable), as the publisher's does. Any other
// failure (a broker down) is left to the pulls, which retry.
func (r *Consumer) checkLogin(ctx context.Context) error {
	for _, b := range r.brokers {
		cctx, cancel := context.WithTimeout(ctx, rmqPullCallTimeout)
		_, err := r.admin.BrokerVersion(cctx, b.Addr)
		cancel()
		if err != nil && rmqLoginRefused(err) {
			return fmt.Errorf("%s: %w", b, errRMQLoginRefused(r.cfg, err))
		}
	}
	return nil
}

// route asks the name servers, in order, for topic's read queues per broker name (nil: no such topic).
func (r *Consumer) route(ctx context.Context, topic string) (map[string]int, error) {
	var errs []error
	for _, ns := range r.cfg.NameServers {
		cctx, cancel := context.WithTimeout(ctx, rmqPullCallTimeout)
		qs, err := r.admin.Route(cctx, ns, topic)
		cancel()
		if err == nil {
			return qs, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ns, err))
	}
	return nil, errors.Join(errs...)
}

// pullBroker pulls topic from every queue of broker b until ctx ends, or returns the error of a pull
// the broker refused for want of permission: a refused login (ErrUnavailable) or a topic the user may
// not read (ErrRejected).
func (r *Consumer) pullBroker(ctx context.Context, host int, b admin.Broker, topic string, handle func(publishers.Delivery)) error {
	offsets := map[int]int64{}
	queues := 0
	var routed time.Time
	idle := rmqPullIdleMin
	// A broker that is down fails every round: the rounds follow the redial policy then, and the
	// warnings are rate-limited (r.log).
	var back publishers.Redial
	var failed error
	warn := func(msg string, err error) {
		failed = err
		r.log.Warn(msg, "broker", b.String(), "topic", topic, "err", err)
	}
	for ctx.Err() == nil {
		failed = nil
		if time.Since(routed) >= rmqRouteRefresh {
			if qs, err := r.route(ctx, topic); err == nil {
				queues, routed = qs[b.Name], time.Now()
			} else if ctx.Err() == nil {
				warn("rocketmq consumer: route", err)
			}
		}
		got := 0
		for q := range queues {
			cctx, cancel := context.WithTimeout(ctx, rmqPullCallTimeout)
			msgs, next, err := r.admin.Pull(cctx, b.Addr, r.opts.Group, topic, q, offsets[q], rmqPullBatch)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				if rmqLoginRefused(err) {
					return fmt.Errorf("%s: %w", b, errRMQLoginRefused(r.cfg, err))
				}
				if _, denied := rmqNoPermission(err); denied {
					return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("%s refused to let this login read %s: %w", b, topic, err))
				}
				warn("rocketmq consumer: pull", err)
				continue
			}
			now := time.Now()
			for _, m := range msgs {
				handle(publishers.Delivery{Host: host, Topic: topic, Body: m.Body, Received: now})
			}
			got += len(msgs)
			if next > offsets[q] {
				offsets[q] = next
			}
		}
		if got > 0 {
			idle = rmqPullIdleMin
			continue
		}
		wait := idle
		if failed != nil {
			wait = max(idle, back.Failed(r.backoff, time.Now(), failed))
		} else {
			back = publishers.Redial{}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		idle = min(2*idle, rmqPullIdleMax)
	}
	return nil
}

// Close implements Consumer.
func (r *Consumer) Close() error {
	r.scope.Close()
	return nil
}
