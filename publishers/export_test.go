package publishers

import "context"

// IgnoreNSQSizeLimit makes p's connections forget nsqd's message size limit, so a test can send what
// nsqd refuses and closes the connection for.
func IgnoreNSQSizeLimit(p *NSQ) {
	dial := p.pool.dial
	p.pool.dial = func(ctx context.Context, addr string) (*nsqConn, error) {
		c, err := dial(ctx, addr)
		if c != nil {
			c.maxMsg = 0
		}
		return c, err
	}
}
