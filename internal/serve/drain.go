package serve

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// How a shutdown drains the listen backlog (App.drain): the listener closes once no connection has
// arrived for drainQuiet, or after drainMax however busy it is.
const (
	drainQuiet = 50 * time.Millisecond
	drainMax   = time.Second
)

// errDrained is what Accept returns once a drain has closed the listener; Serve returns it.
var errDrained = errors.New("listener drained and closed for shutdown")

// drainListener is the HTTP server's TCP listener. Closing a listener resets the connections waiting
// in its backlog, and a client there has usually sent its request already: a request sent and never
// answered. Drain instead takes every queued connection, and closes the listener only once the backlog
// has stayed empty for a while, so what can still be reset is a connection that completes its handshake
// in the instant between the last empty Accept and the close.
type drainListener struct {
	*net.TCPListener
	draining  atomic.Bool
	quiet     time.Duration
	end       time.Time     // no more Accepts after it; written before draining is set
	drained   chan struct{} // closed when the drain has closed the listener
	closeOnce sync.Once
	closeErr  error
}

func newDrainListener(l *net.TCPListener) *drainListener {
	return &drainListener{TCPListener: l, drained: make(chan struct{})}
}

// Drain switches Accept to draining: it takes what is queued, then closes the listener once nothing has
// arrived for quiet, or after max. The returned channel is closed when it has.
func (l *drainListener) Drain(quiet, max time.Duration) <-chan struct{} {
	l.quiet, l.end = quiet, time.Now().Add(max)
	l.draining.Store(true)
	// An Accept waiting without a deadline wakes at this one.
	_ = l.TCPListener.SetDeadline(time.Now().Add(quiet))
	return l.drained
}

func (l *drainListener) Accept() (net.Conn, error) {
	if !l.draining.Load() {
		c, err := l.TCPListener.Accept()
		if err == nil || !l.draining.Load() {
			return c, err
		}
		// Drain's deadline woke this Accept: the backlog was empty for quiet.
	} else {
		now := time.Now()
		if now.Before(l.end) {
			d := now.Add(l.quiet)
			if d.After(l.end) {
				d = l.end
			}
			_ = l.TCPListener.SetDeadline(d)
			c, err := l.TCPListener.Accept()
			if err == nil {
				return c, nil
			}
		}
	}
	_ = l.Close()
	return nil, errDrained
}

// Close is idempotent: Serve closes the listener again after a drain.
func (l *drainListener) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.TCPListener.Close()
		close(l.drained)
	})
	return l.closeErr
}
