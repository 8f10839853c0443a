package nsq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nsqio/go-nsq"

	"github.com/mqtarget/mqtarget/publishers"
)

// Consumer reads topics from every configured nsqd directly (no nsqlookupd), with go-nsq's consumer:
// one go-nsq Consumer per Consume call, one connection per nsqd, messages FINished when the handler
// returns.
type Consumer struct {
	cfg   Config
	tls   *tls.Config // nil: plain TCP
	opts  publishers.ConsumerOptions
	log   *slog.Logger
	scope *publishers.Scope
}

// nsqMaxInFlight is how many unacknowledged messages one nsqd may push to one Consume call.
const nsqMaxInFlight = 1000

// nsqReconnectInterval is how long go-nsq waits before connecting again to an nsqd that went away. go-nsq
// runs that wait on a goroutine of its own that Stop does not wait for, so it also bounds how long one
// can outlive Close.
const nsqReconnectInterval = time.Second

// NewConsumer creates the consumer; it connects in Consume. o.Group is the NSQ channel.
func NewConsumer(c Config, o publishers.ConsumerOptions, log *slog.Logger) (*Consumer, error) {
	if err := c.Validate("nsq"); err != nil {
		return nil, err
	}
	if len(c.Hosts) == 0 {
		return nil, errors.New("nsq.hosts: at least one host is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = publishers.LimitLog(log)
	if o.Group == "" {
		o.Group = publishers.DefaultConsumerGroup
	}
	if !nsq.IsValidChannelName(o.Group) {
		return nil, publishers.Wrap(publishers.ErrBadGroup, fmt.Errorf("nsq channel %q: not a valid NSQ channel name", o.Group))
	}
	tc, err := c.TLSConfig.Client("nsq")
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: c, tls: tc, opts: o, log: log, scope: publishers.NewScope()}, nil
}

// Hosts implements Consumer.
func (c *Consumer) Hosts() []string { return c.cfg.Hosts }

// Consume implements Consumer.
func (c *Consumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if !nsq.IsValidTopicName(topic) {
		return publishers.Wrap(publishers.ErrBadTopic, fmt.Errorf("nsq topic %q: not a valid NSQ topic name", topic))
	}
	ctx, done, err := c.scope.Enter(ctx)
	if err != nil {
		return err
	}
	defer done()

	// One go-nsq Consumer per host: a Consumer spreads MaxInFlight over its connections and gives a
	// connection that joins later no RDY until its next redistribution (seconds), so with one Consumer
	// for all hosts a second host's messages arrived only after that pause.
	var conss []*nsq.Consumer
	stop := func() {
		for _, cons := range conss {
			cons.Stop()
		}
		for _, cons := range conss {
			<-cons.StopChan // every connection closed and the handler goroutine gone
		}
	}
	// Every host is checked before any is subscribed to: a host failing after another took messages
	// would make the caller's retry have nsqd deliver those again (at least once, as nsqd promises).
	for i, h := range c.cfg.Hosts {
		if err := c.check(ctx, h); err != nil {
			if ctx.Err() != nil { // ended (or closed) while connecting: a stop, not a failure
				return nil
			}
			return fmt.Errorf("nsq.hosts[%d] %s: %w", i, h, err)
		}
	}
	for i, h := range c.cfg.Hosts {
		cons, err := c.hostConsumer(topic, i, handle)
		if err != nil {
			stop()
			return err
		}
		conss = append(conss, cons)
		if err := cons.ConnectToNSQD(h); err != nil {
			stop()
			return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nsq.hosts[%d] %s: %w", i, h, err))
		}
	}
	<-ctx.Done()
	stop()
	return nil
}

// hostConsumer makes the go-nsq Consumer of topic on host i, handing its messages to handle.
func (c *Consumer) hostConsumer(topic string, i int, handle func(publishers.Delivery)) (*nsq.Consumer, error) {
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = nsqMaxInFlight
	// No output buffer on nsqd's side: by default it holds what it sends a consumer until 16 KiB are
	// buffered or its 250 ms flush ticker fires, so a lone message (a round trip's, a slow load's)
	// arrived up to 250 ms late and the latency measured was nsqd's flush interval.
	cfg.OutputBufferSize = -1
	cfg.DialTimeout = c.cfg.DialTimeout
	cfg.LookupdPollInterval = nsqReconnectInterval
	cfg.AuthSecret = string(c.cfg.AuthSecret)
	if c.tls != nil {
		cfg.TlsV1 = true
		cfg.TlsConfig = publishers.VerifyAsConfigured(c.tls)
	}
	cons, err := nsq.NewConsumer(topic, c.opts.Group, cfg)
	if err != nil {
		return nil, fmt.Errorf("nsq consumer: %w", err)
	}
	cons.SetLogger(nsqLogger{c.log}, nsq.LogLevelError) // its warnings include routine ones at Stop
	cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		handle(publishers.Delivery{Host: i, Topic: topic, Body: m.Body, Received: time.Now()})
		return nil
	}))
	return cons, nil
}

// check connects to addr once with our own handshake: go-nsq carries on in plain text when nsqd does
// not offer TLS, and its errors say neither that TLS was the problem nor which setting AUTH lacks.
func (c *Consumer) check(ctx context.Context, addr string) error {
	conn, _, err := nsqHandshake(ctx, addr, c.cfg.DialTimeout, c.tls, string(c.cfg.AuthSecret))
	if err != nil {
		return err
	}
	return conn.Close()
}

// Close implements Consumer.
func (c *Consumer) Close() error {
	c.scope.Close()
	return nil
}

// nsqLogger forwards go-nsq's log lines to slog.
type nsqLogger struct{ log *slog.Logger }

func (l nsqLogger) Output(_ int, s string) error {
	level := slog.LevelInfo
	switch {
	case strings.HasPrefix(s, "ERR"):
		level = slog.LevelError
	case strings.HasPrefix(s, "WRN"):
		level = slog.LevelWarn
	}
	l.log.Log(context.Background(), level, s, "component", "go-nsq consumer")
	return nil
}
