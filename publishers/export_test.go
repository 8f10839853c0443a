package publishers

import (
	"context"
	"time"
)

// IgnoreNSQSizeLimit makes p's connections forget nsqd's message size limit, so a test can send what
// nsqd refuses and closes the connection for.
func IgnoreNSQSizeLimit(p *NSQ) {
	dial := p.pool.Dial
	p.pool.Dial = func(ctx context.Context, addr string) (*nsqConn, error) {
		c, err := dial(ctx, addr)
		if c != nil {
			c.maxMsg = 0
		}
		return c, err
	}
}

// CoalesceQueued is how many publishes wait in host and topic's coalescer.
func CoalesceQueued(p *NSQ, host int, topic string) int {
	v, ok := p.coalescers.Load(coalesceKey{host, topic})
	if !ok {
		return 0
	}
	c := v.(*coalescer)
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// NSQCommands is how many commands p's current connections have sent.
func NSQCommands(p *NSQ) (n uint64) {
	for _, slots := range p.pool.slots {
		for _, s := range slots {
			s.mu.Lock()
			if s.live {
				_, c := s.cur.Stats()
				n += c
			}
			s.mu.Unlock()
		}
	}
	return n
}

// SetFailureLogInterval lets tests move the failure log's rate limit instead of waiting for it.
func (m *Metrics) SetFailureLogInterval(d time.Duration) { m.logEvery = d }
