package roundtrip

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// Client sends messages and waits for their acks: it consumes the ack topics of a fixed set of topics
// and correlates what arrives there by id.
type Client struct {
	pub       publishers.Publisher
	corr      *Correlator
	ackSuffix string
	topics    map[string]bool
	log       *slog.Logger
	ctx       context.Context // ends with Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	// live holds, per topic, a channel closed once StartProbes' probe of it finished; nil without
	// StartProbes. Written before the first RoundTrip, read-only after.
	live map[string]chan struct{}
}

// ErrTopic is returned by RoundTrip for a topic whose ack topic the Client does not consume.
var ErrTopic = errors.New("topic has no round trip")

// ErrNoHeader is returned by RoundTrip for a payload without message's header (shorter than
// message.HeaderLen, or not built by message.Source): its ack could not be matched, so nothing is sent.
var ErrNoHeader = fmt.Errorf("round trip needs a payload of at least %d bytes with a message header", message.HeaderLen)

// NewClient starts consuming topic+ackSuffix for every topic with acks (whose Close stays the
// caller's). Acks go to corr.
func NewClient(pub publishers.Publisher, acks publishers.Consumer, topics []string, ackSuffix string, corr *Correlator, log *slog.Logger) *Client {
	if ackSuffix == "" {
		ackSuffix = DefaultAckSuffix
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{pub: pub, corr: corr, ackSuffix: ackSuffix, topics: map[string]bool{}, log: log}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	ctx := c.ctx
	for _, t := range topics {
		c.topics[t] = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			consumeRetrying(ctx, acks, t+ackSuffix, corr.Handle, log.With("role", "round-trip acks"))
		}()
	}
	return c
}

// RoundTrip publishes body (a payload built by message.Source) to topic on host and waits until its ack
// came back or ctx ended (then ErrLost). A publish error is returned as it is, with nothing counted.
func (c *Client) RoundTrip(ctx context.Context, host int, topic string, body []byte) (Ack, error) {
	if !c.topics[topic] {
		return Ack{}, fmt.Errorf("%w: %q", ErrTopic, topic)
	}
	id, _, err := message.Parse(body)
	if err != nil {
		return Ack{}, fmt.Errorf("%w: %w", ErrNoHeader, err)
	}
	if live := c.live[topic]; live != nil {
		select {
		case <-live:
		case <-ctx.Done(): // the paths are not proven yet: a publish now might reach nobody
			c.corr.lostUnsent()
			return Ack{}, errors.Join(ErrLost, ErrNotLive, ctx.Err())
		}
	}
	p := c.corr.Expect(id)
	if err := c.pub.Publish(ctx, host, topic, body); err != nil {
		p.Cancel()
		return Ack{}, err
	}
	return p.Wait(ctx)
}

// StartProbes probes every topic in the background (Probe, with payloads of src, for up to wait each)
// and makes RoundTrip on a topic wait until its probe finished, however it ended: a round trip started
// while the consumers still subscribe waits for them (counted lost when its ctx ends first) instead of
// being published to nobody; once a probe gave up (no echo within wait), round trips go on as without
// it. Call it once, before the first RoundTrip.
func (c *Client) StartProbes(src *message.Source, wait time.Duration) {
	c.live = map[string]chan struct{}{}
	for t := range c.topics {
		done := make(chan struct{})
		c.live[t] = done
		c.wg.Go(func() {
			defer close(done)
			switch err := c.Probe(c.ctx, t, src, wait); {
			case err == nil:
				c.log.Info("round trip live on every host", "topic", t)
			case c.ctx.Err() == nil:
				c.log.Warn("round trip probe gave up; round trips go on unproven", "topic", t, "err", err)
			}
		})
	}
}

// Correlator returns the client's correlator, for its counts.
func (c *Client) Correlator() *Correlator { return c.corr }

// Close stops consuming acks and waits for it.
func (c *Client) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// consumeRetrying consumes topic until ctx ends. Consume fails at once when a host cannot be
// subscribed to at the start (a broker still starting, or down): it is tried again, after a pause that
// doubles up to 30 s, so an echo or ack consumer started before its broker still comes up.
func consumeRetrying(ctx context.Context, cons publishers.Consumer, topic string, handle func(publishers.Delivery), log *slog.Logger) {
	pause := 500 * time.Millisecond
	for {
		err := cons.Consume(ctx, topic, handle)
		if err == nil || ctx.Err() != nil || errors.Is(err, publishers.ErrClosed) ||
			errors.Is(err, publishers.ErrBadTopic) || errors.Is(err, publishers.ErrBadGroup) {
			if err != nil && ctx.Err() == nil {
				log.Error("consuming", "topic", topic, "err", err)
			}
			return
		}
		log.Warn("consuming; retrying", "topic", topic, "in", pause, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// AckGroup names a process's ack consumer (the consumer group, on brokers that have one): its own,
// since consumers sharing one split the acks, made what broker's entry says (a broker may need it to
// end with its last consumer instead of keeping acks for it forever: publishers.Broker.AckGroup).
func AckGroup(broker *publishers.Broker, s publishers.SectionSet) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return broker.AckGroupOf(s, "mqtarget-roundtrip-"+hex.EncodeToString(r[:]))
}

// EchoGroup is the echoes' consumer group: shared, so echoes split the work.
const EchoGroup = "mqtarget-echo"
