package roundtrip

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// ErrLost is returned by Pending.Wait when the ack did not come back in time; the round trip counts as lost.
var ErrLost = errors.New("ack did not come back in time")

// Ack is one matched acknowledgement.
type Ack struct {
	ID       string
	Sent     time.Time     // the send time in the payload
	Received time.Time     // when the ack was read
	RTT      time.Duration // Received - Sent: one clock, the sender's
}

// Stats count what the correlator saw.
type Stats struct {
	Acked, Lost, Duplicates, OutOfOrder, Unknown int64
}

// Correlator matches acks to the ids waiting for them. Ids stay remembered for retain after their ack
// (or their loss), so a duplicate within that window is counted; memory is bounded by the ids in that
// window and by maxFinished, not by the run's length nor by whether acks still arrive.
type Correlator struct {
	retain time.Duration
	// maxFinished caps finished whatever retain says: past it the oldest are forgotten (a duplicate of
	// one then counts as unknown). now is time.Now but for tests.
	maxFinished int
	now         func() time.Time

	mu       sync.Mutex
	waiting  map[string]*Pending
	finished map[string]time.Time // id → when it was acked or lost
	// order holds finished's ids in the order they finished, so forgetting the expired (or, at
	// maxFinished, the oldest) pops its front instead of scanning the map.
	order  []finishedID
	maxSeq map[uint32]uint64 // highest acked sequence number per producer run
	stats  Stats
	// probes are the ids of Client.Probe's messages, each with what to call when it comes back. They
	// are kept for the correlator's life, never pruned, so a probe that trails the run (a retry's, or
	// one the broker delivers twice) is still recognised and counted nowhere; Probe bounds how many
	// there are (probeBudget per host).
	probes map[string]func()

	rtt                          prometheus.Observer
	lost, duplicates, outOfOrder prometheus.Counter
}

type finishedID struct {
	id string
	at time.Time
}

// DefaultMaxFinished bounds the finished ids a Correlator remembers for duplicates: about 30 MB, a
// minute of retain at 4000 round trips a second.
const DefaultMaxFinished = 1 << 18

// NewCorrelator returns a correlator that remembers finished ids for retain (at least the timeout its
// callers wait, so a late duplicate is still recognised), at most DefaultMaxFinished of them. m may be nil.
func NewCorrelator(broker string, retain time.Duration, m *Metrics) *Correlator {
	c := &Correlator{retain: retain, maxFinished: DefaultMaxFinished, now: time.Now,
		waiting: map[string]*Pending{}, finished: map[string]time.Time{}, maxSeq: map[uint32]uint64{},
		probes: map[string]func(){}}
	if m != nil {
		c.rtt = m.roundTrip.WithLabelValues(broker)
		c.lost = m.lost.WithLabelValues(broker)
		c.duplicates = m.duplicates.WithLabelValues(broker)
		c.outOfOrder = m.outOfOrder.WithLabelValues(broker)
	}
	return c
}

// Pending is a round trip waiting for its ack.
type Pending struct {
	c  *Correlator
	id string
	ch chan Ack // buffered: Handle never blocks
}

// Expect registers id before its message is published, so an ack cannot arrive unexpected.
func (c *Correlator) Expect(id string) *Pending {
	p := &Pending{c: c, id: id, ch: make(chan Ack, 1)}
	c.mu.Lock()
	c.waiting[id] = p
	c.mu.Unlock()
	return p
}

// Wait returns the ack, or ErrLost (joined with ctx's error) when ctx ends first; then the round trip
// counts as lost.
func (p *Pending) Wait(ctx context.Context) (Ack, error) {
	select {
	case a := <-p.ch:
		return a, nil
	case <-ctx.Done():
	}
	c := p.c
	c.mu.Lock()
	if _, still := c.waiting[p.id]; !still { // the ack won the race
		c.mu.Unlock()
		return <-p.ch, nil
	}
	delete(c.waiting, p.id)
	c.finish(p.id, c.now()) // forgets the expired too: with no acks arriving, Handle never does
	c.stats.Lost++
	c.mu.Unlock()
	if c.lost != nil {
		c.lost.Inc()
	}
	return Ack{}, errors.Join(ErrLost, ctx.Err())
}

// expectProbe registers a probe's id before it is published; back is called (under the correlator's
// lock: it must not block) every time the probe comes back.
func (c *Correlator) expectProbe(id string, back func()) {
	c.mu.Lock()
	c.probes[id] = back
	c.mu.Unlock()
}

// IsProbe reports whether id is one of Client.Probe's messages, which no count includes.
func (c *Correlator) IsProbe(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.probes[id]
	return ok
}

// lostUnsent counts a round trip given up before its message was published (Client.RoundTrip waiting
// for its paths to be proven live) as lost.
func (c *Correlator) lostUnsent() {
	c.mu.Lock()
	c.stats.Lost++
	c.mu.Unlock()
	if c.lost != nil {
		c.lost.Inc()
	}
}

// Cancel withdraws a round trip whose message was never published; it counts as nothing.
func (p *Pending) Cancel() {
	p.c.mu.Lock()
	delete(p.c.waiting, p.id)
	p.c.mu.Unlock()
}

// Handle takes one delivery from the ack topic; it is safe to call from several goroutines.
func (c *Correlator) Handle(d publishers.Delivery) {
	id, sent, err := message.Parse(d.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.stats.Unknown++
		return
	}
	if back, ok := c.probes[id]; ok { // a probe, however late or often: counted nowhere
		back()
		return
	}
	p := c.waiting[id]
	if p == nil {
		if _, done := c.finished[id]; done {
			c.stats.Duplicates++ // a second ack, or one for a round trip already given up as lost
			if c.duplicates != nil {
				c.duplicates.Inc()
			}
		} else {
			c.stats.Unknown++ // another sender's, or acked before retain ago
		}
		return
	}
	delete(c.waiting, id)
	c.finish(id, d.Received)
	c.stats.Acked++
	if n, err := message.ParseID(id); err == nil {
		run, seq := message.Run(n), message.Seq(n)
		if seq < c.maxSeq[run] {
			c.stats.OutOfOrder++
			if c.outOfOrder != nil {
				c.outOfOrder.Inc()
			}
		} else {
			c.maxSeq[run] = seq
		}
	}
	a := Ack{ID: id, Sent: sent, Received: d.Received, RTT: d.Received.Sub(sent)}
	if c.rtt != nil {
		c.rtt.Observe(a.RTT.Seconds())
	}
	p.ch <- a
}

// finish remembers id as finished at, and forgets the ids finished more than retain before it, then the
// oldest while more than maxFinished remain. Called with mu held.
func (c *Correlator) finish(id string, at time.Time) {
	c.finished[id] = at
	c.order = append(c.order, finishedID{id, at})
	for len(c.order) > 0 && (at.Sub(c.order[0].at) > c.retain || len(c.order) > c.maxFinished) {
		f := c.order[0]
		c.order[0] = finishedID{} // the backing array outlives the pop until append copies it
		c.order = c.order[1:]
		if t, ok := c.finished[f.id]; ok && t.Equal(f.at) { // else finished again since, and kept
			delete(c.finished, f.id)
		}
	}
}

// Stats returns the counts so far.
func (c *Correlator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
