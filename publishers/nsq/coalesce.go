package nsq

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// coalesceMaxBytes bounds one coalesced MPUB's messages, well under nsqd's default --max-body-size (5 MiB).
const coalesceMaxBytes = 1 << 20

// coalescer turns concurrent publishes to one host and topic into MPUBs (nsq.coalesce): while one
// command is in flight, newcomers queue; when it is answered, everything queued leaves as the next MPUB.
// There is no timer: a lone publish leaves at once. Each caller is answered with its own command's
// outcome, so a rejected MPUB fails every request in it.
type coalescer struct {
	p     *Publisher
	key   coalesceKey
	mu    sync.Mutex
	busy  bool // a command is in flight
	queue []*coalesced
	spare []*coalesced // the last batch's array, for the next queue: one command is in flight at a time
	// bodies is the batch's messages for the encoder, reused: the encoder runs within conn.Send.
	bodies [][]byte
}

type coalesceKey struct {
	host  int
	topic string
}

var errNoLiveConn = errors.New("no live connection")

// coalesced is one waiting publish, recycled (waiting) once its caller has its outcome.
type coalesced struct {
	body []byte
	by   time.Time // when its caller stops waiting (zero: none)
	res  chan error
}

// waiting recycles coalesced publishes and their channels: two allocations per request otherwise.
var waiting = sync.Pool{New: func() any { return &coalesced{res: make(chan error, 1)} }} // buffered: the read loop never waits for a caller

// publishCoalesced publishes body through host and topic's coalescer and waits for its outcome.
func (p *Publisher) publishCoalesced(ctx context.Context, host int, topic string, body []byte) error {
	if err := checkNSQTopicFraming(host, topic); err != nil {
		return err
	}
	conn, err := p.pool.Get(ctx, host)
	if err != nil {
		return err
	}
	if err := conn.checkOne(host, body); err != nil {
		return err
	}
	key := coalesceKey{host, topic}
	v, ok := p.coalescers.Load(key)
	if !ok {
		v, _ = p.coalescers.LoadOrStore(key, &coalescer{p: p, key: key})
	}
	c := v.(*coalescer)
	w := waiting.Get().(*coalesced)
	w.body = body
	w.by, _ = ctx.Deadline()
	c.mu.Lock()
	if c.busy {
		c.queue = append(c.queue, w)
		c.mu.Unlock()
	} else {
		c.busy = true
		batch := append(c.spare[:0], w)
		c.spare = nil
		c.mu.Unlock()
		c.send(conn, batch)
	}
	select {
	case err := <-w.res:
		w.body = nil
		waiting.Put(w)
		return err
	case <-ctx.Done():
		// Still queued: take it out, so nsqd never gets a message whose caller was told it failed.
		c.mu.Lock()
		i := slices.Index(c.queue, w)
		if i >= 0 {
			c.queue = slices.Delete(c.queue, i, i+1)
		}
		c.mu.Unlock()
		if i >= 0 { // else it is in a command in flight, whose answer still comes to w.res
			w.body = nil
			waiting.Put(w)
		}
		return publishers.CtxErr(ctx)
	}
}

// send writes batch as one PUB or MPUB on conn; its answer sends what queued meanwhile.
func (c *coalescer) send(conn *nsqConn, batch []*coalesced) {
	for len(batch) > 0 {
		var err error
		if conn != nil {
			by := batch[0].by
			bodies := c.bodies[:0]
			for _, w := range batch {
				bodies = append(bodies, w.body)
				if !w.by.IsZero() && (by.IsZero() || w.by.Before(by)) {
					by = w.by
				}
			}
			c.bodies = bodies
			topic := c.key.topic
			// The encoder runs within Send, under the connection's lock; it lets go of the messages once
			// they are in the connection's buffer.
			enc := func(b []byte, _ uint64) []byte {
				if len(bodies) == 1 {
					b = appendPUB(b, topic, bodies[0])
				} else {
					b = appendMPUB(b, topic, bodies)
				}
				clear(bodies)
				return b
			}
			if err = conn.Send(by, enc, func(err error) { c.answered(conn, batch, err) }); err == nil {
				return
			}
		} else if c.p.pool.Closed() {
			err = publishers.ErrClosed
		} else {
			err = publishers.Wrap(publishers.ErrUnavailable, errNoLiveConn)
		}
		// Not sent: fail this batch and go on with what queued meanwhile.
		for _, w := range batch {
			w.res <- err
		}
		batch = c.next(batch)
		conn = c.p.pool.Live(c.key.host)
	}
}

// answered delivers a command's outcome to every publish in it and sends the next batch, on the same
// connection while it lives.
func (c *coalescer) answered(conn *nsqConn, batch []*coalesced, err error) {
	for _, w := range batch {
		w.res <- err
	}
	if next := c.next(batch); len(next) > 0 {
		if conn.Dead() {
			// On the read loop: live never dials or waits, so this never blocks on a connection.
			conn = c.p.pool.Live(c.key.host)
		}
		c.send(conn, next)
	}
}

// next takes the queued publishes that fit in one MPUB, or marks the coalescer idle (and forgets it,
// so topics seen once do not accumulate) when none are queued. done is the batch just answered: its
// array serves the next queue.
func (c *coalescer) next(done []*coalesced) []*coalesced {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(done) // its publishes belong to their callers again
	c.spare = done[:0]
	if len(c.queue) == 0 {
		c.busy = false
		c.p.coalescers.CompareAndDelete(c.key, c)
		return nil
	}
	n, size := 0, 0
	for n < len(c.queue) && (n == 0 || size+4+len(c.queue[n].body) <= coalesceMaxBytes) {
		size += 4 + len(c.queue[n].body)
		n++
	}
	if n == len(c.queue) { // the whole queue leaves: swap arrays instead of copying
		batch := c.queue
		c.queue, c.spare = c.spare, nil
		return batch
	}
	batch := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	return batch
}
