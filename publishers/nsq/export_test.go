package nsq

import "context"

// IgnoreSizeLimit makes p's connections forget nsqd's message size limit, so a test can send what
// nsqd refuses and closes the connection for.
func IgnoreSizeLimit(p *Publisher) {
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
func CoalesceQueued(p *Publisher, host int, topic string) int {
	v, ok := p.coalescers.Load(coalesceKey{host, topic})
	if !ok {
		return 0
	}
	c := v.(*coalescer)
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// Commands is how many commands p's current connections have sent.
func Commands(p *Publisher) (n uint64) {
	p.pool.EachLive(func(c *nsqConn) {
		_, cmds := c.Stats()
		n += cmds
	})
	return n
}
