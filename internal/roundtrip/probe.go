package roundtrip

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// Why a probe, and not a "subscribed" signal from publishers.Consumer: Consume returns only at its end,
// and the brokers that keep nothing for a topic without a subscriber (publish–subscribe topics with no
// retention) drop what is published before the SUBSCRIBE took effect, so a measurement must not start before
// then. A signal would change a contract seven broker packages implement, each with its own notion of
// "subscribed" (a SUBACK, a consumer group's assignment or rebalance, a channel created), and it
// would prove one consumer at a time, not the path: publisher → host → echo's subscription → ack topic →
// the ack consumer's subscription. A probe proves that whole path per host, on every broker the same way,
// and also waits out what a signal would not see (an ack topic created on first use, an echo in
// another process that is not running yet).

// ErrNotLive is returned by Probe when a host's probe did not come back in time.
var ErrNotLive = errors.New("round trip not live")

// DefaultProbeWait bounds Probe when its caller gives no wait: the time a broker's consumers take to
// subscribe (a consumer group's assignment or rebalance) with room to spare.
const DefaultProbeWait = 30 * time.Second

// Probe pacing: a probe is published again after probeFirstPause, then at pauses doubling up to
// probeMaxPause, and at most probeBudget times per host (then Probe only waits), so a path that never
// comes up costs a few messages a second at most.
const (
	probeFirstPause = 20 * time.Millisecond
	probeMaxPause   = time.Second
	probeBudget     = 64
)

// Probe proves every path of topic live before a measurement starts: for each of the publisher's hosts
// it publishes a probe (a small payload of src, registered with the correlator as a probe, which no
// count, neither acked, lost, duplicate nor unknown, ever includes, however late it comes) to topic on
// that host, again at a slowing pace, until one came back on the ack topic, through the echo and this
// client's ack consumer. It returns nil once every host's probe came back; otherwise, after wait, an
// error wrapping ErrNotLive that names each host whose probe never did (with its last publish error), or
// ctx's error when ctx ended first.
func (c *Client) Probe(ctx context.Context, topic string, src *message.Source, wait time.Duration) error {
	if !c.topics[topic] {
		return fmt.Errorf("%w: %q", ErrTopic, topic)
	}
	if wait <= 0 {
		wait = DefaultProbeWait
	}
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	hosts := c.pub.Hosts()
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for h := range hosts {
		wg.Go(func() {
			if err := c.probeHost(dctx, h, topic, src); err != nil {
				if ctx.Err() != nil {
					errs[h] = ctx.Err()
					return
				}
				errs[h] = fmt.Errorf("%w: host %d (%s): no probe published to %q came back through the echo and the ack consumer within %v%w",
					ErrNotLive, h, hosts[h], topic, wait, err)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errs...)
}

// probeHost publishes probes to host until one comes back, and returns nil, or the reason none did
// when ctx ends: the count published and the last publish error, as a suffix of Probe's message.
func (c *Client) probeHost(ctx context.Context, host int, topic string, src *message.Source) error {
	back := make(chan struct{})
	var once sync.Once
	arrived := func() { once.Do(func() { close(back) }) }
	var published, tries int
	var lastErr error
	pause := probeFirstPause
	for {
		if tries < probeBudget {
			tries++
			id := src.NextID()
			c.corr.expectProbe(message.FormatID(id), arrived) // before the publish: its ack cannot come first
			err := c.pub.Publish(ctx, host, topic, src.Build(id, message.RunHeaderLen))
			switch {
			case errors.Is(err, publishers.ErrRejected):
				// The broker refuses the topic (a user without permission for it, say): probing on
				// would be refused the same way, and a broker that closes the connection with its
				// refusal would cost a connection each time.
				return fmt.Errorf(" (the broker rejected probe %d: %w)", tries, err)
			case err != nil:
				lastErr = err
			default:
				published++
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-back:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			select {
			case <-back: // came back just as the wait ended
				return nil
			default:
			}
			if lastErr != nil {
				return fmt.Errorf(" (%d of %d published; last publish error: %w)", published, tries, lastErr)
			}
			return fmt.Errorf(" (%d published; is an echo consuming it?)", published)
		case <-t.C:
		}
		pause = min(2*pause, probeMaxPause)
	}
}
