package roundtrip_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// memBroker is an in-memory broker of independent hosts that keeps nothing for a topic nobody
// subscribes to, like MQTT, NATS core and STOMP topics, and whose subscriptions take effect late,
// deterministically: a new subscription misses the first `late` messages published to its topic on
// that host after Consume was called (its SUBSCRIBE still on the way). Messages are delivered in
// Publish, before it returns.
//
// hold, when set, names a topic whose first delivered message is held back: delivered only once
// releaseAfter messages were published to that topic (or release is called), or, with dup, delivered
// at once and again then.
type memBroker struct {
	hosts        int
	late         int
	hold         string
	dup          bool
	releaseAfter int
	refuse       string // a topic whose publishes are rejected (counted, not delivered)

	mu        sync.Mutex
	subs      map[memKey][]*memSub
	published map[string]int        // per topic
	held      []publishers.Delivery // waiting for releaseAfter
	heldIDs   []string              // the ids ever held
	acked     map[string]int        // per id: deliveries to a subscriber of an ack topic
	perHost   map[memKey]int        // publishes per host and topic
	ids       map[string]bool       // every id published
}

type memKey struct {
	host  int
	topic string
}

type memSub struct {
	mu     sync.RWMutex // held for reading while handle runs; Consume takes it to end the subscription
	gone   bool
	skip   int // messages still to miss
	handle func(publishers.Delivery)
}

func newMemBroker(hosts, late int) *memBroker {
	return &memBroker{hosts: hosts, late: late, subs: map[memKey][]*memSub{}, published: map[string]int{},
		acked: map[string]int{}, perHost: map[memKey]int{}, ids: map[string]bool{}}
}

// memPub publishes to a memBroker.
type memPub struct{ b *memBroker }

func (p memPub) Publish(ctx context.Context, host int, topic string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if host < 0 || host >= p.b.hosts {
		return fmt.Errorf("no host %d", host)
	}
	if topic == p.b.refuse {
		p.b.mu.Lock()
		p.b.perHost[memKey{host, topic}]++
		p.b.mu.Unlock()
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("mem%d: not permitted: %s", host, topic))
	}
	p.b.publish(host, topic, body)
	return nil
}

func (p memPub) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	for _, b := range bodies {
		if err := p.Publish(ctx, host, topic, b); err != nil {
			return err
		}
	}
	return nil
}

func (p memPub) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	done(p.Publish(context.Background(), host, topic, body))
	return nil
}

func (p memPub) Hosts() []string { return p.b.hostNames() }
func (memPub) Ping(context.Context, int) error {
	return nil
}
func (memPub) ValidateTopic(string) error { return nil }
func (memPub) Close() error               { return nil }

func (b *memBroker) hostNames() []string {
	var hs []string
	for h := range b.hosts {
		hs = append(hs, fmt.Sprintf("mem%d", h))
	}
	return hs
}

type memDelivery struct {
	sub *memSub
	d   publishers.Delivery
}

func (b *memBroker) publish(host int, topic string, body []byte) {
	k := memKey{host, topic}
	d := publishers.Delivery{Host: host, Topic: topic, Body: body}
	b.mu.Lock()
	b.published[topic]++
	b.perHost[k]++
	if id, _, err := message.Parse(body); err == nil {
		b.ids[id] = true
	}
	n := b.published[topic]
	var out []memDelivery
	for _, s := range b.subs[k] {
		if s.skip > 0 {
			s.skip-- // the subscription is not in effect yet: this one reaches nobody
			continue
		}
		out = append(out, memDelivery{s, d})
	}
	if topic == b.hold && len(out) > 0 && len(b.heldIDs) == 0 {
		id, _, _ := message.Parse(body)
		b.heldIDs = append(b.heldIDs, id)
		b.held = append(b.held, d)
		if !b.dup {
			out = nil
		}
	}
	if topic == b.hold && n == b.releaseAfter {
		out = append(out, b.releaseLocked()...)
	}
	b.countAcks(out)
	b.mu.Unlock()
	for _, o := range out {
		o.sub.deliver(o.d)
	}
}

// release delivers what is held now.
func (b *memBroker) release() {
	b.mu.Lock()
	out := b.releaseLocked()
	b.countAcks(out)
	b.mu.Unlock()
	for _, o := range out {
		o.sub.deliver(o.d)
	}
}

// countAcks counts what goes to an ack topic's subscribers, per id. Called with mu held.
func (b *memBroker) countAcks(out []memDelivery) {
	for _, o := range out {
		if strings.HasSuffix(o.d.Topic, roundtrip.DefaultAckSuffix) {
			id, _, _ := message.Parse(o.d.Body)
			b.acked[id]++
		}
	}
}

func (b *memBroker) releaseLocked() []memDelivery {
	var out []memDelivery
	for _, h := range b.held {
		for _, s := range b.subs[memKey{h.Host, h.Topic}] {
			out = append(out, memDelivery{s, h})
		}
	}
	b.held = nil
	return out
}

func (s *memSub) deliver(d publishers.Delivery) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.gone {
		return
	}
	d.Body = append([]byte(nil), d.Body...)
	d.Received = time.Now()
	s.handle(d)
}

// ackedCount is how many times id was delivered to a subscriber of an ack topic.
func (b *memBroker) ackedCount(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.acked[id]
}

func (b *memBroker) heldID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.heldIDs) == 0 {
		return ""
	}
	return b.heldIDs[0]
}

func (b *memBroker) sawID(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ids[id]
}

func (b *memBroker) publishedTo(host int, topic string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.perHost[memKey{host, topic}]
}

// memConsumer consumes from a memBroker.
type memConsumer struct {
	b      *memBroker
	ctx    context.Context
	cancel context.CancelFunc
}

func newMemConsumer(b *memBroker) *memConsumer {
	c := &memConsumer{b: b}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

func (c *memConsumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	var subs []*memSub
	c.b.mu.Lock()
	for h := range c.b.hosts {
		s := &memSub{skip: c.b.late, handle: handle}
		k := memKey{h, topic}
		c.b.subs[k] = append(c.b.subs[k], s)
		subs = append(subs, s)
	}
	c.b.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-c.ctx.Done():
	}
	c.b.mu.Lock()
	for h, s := range subs {
		k := memKey{h, topic}
		for i, o := range c.b.subs[k] {
			if o == s {
				c.b.subs[k] = append(c.b.subs[k][:i:i], c.b.subs[k][i+1:]...)
				break
			}
		}
	}
	c.b.mu.Unlock()
	for _, s := range subs { // no handle runs once Consume returned
		s.mu.Lock()
		s.gone = true
		s.mu.Unlock()
	}
	return nil
}

func (c *memConsumer) Hosts() []string { return c.b.hostNames() }
func (c *memConsumer) Close() error {
	c.cancel()
	return nil
}
