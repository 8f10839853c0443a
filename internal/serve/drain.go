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
	sweptMu   sync.Mutex
	swept     []net.Conn // taken from the backlog as the drain closed the listener; Accept hands them out
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
	if c := l.takeSwept(); c != nil {
		return c, nil
	}
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
	if c := l.takeSwept(); c != nil {
		return c, nil
	}
	return nil, errDrained
}

func (l *drainListener) takeSwept() net.Conn {
	l.sweptMu.Lock()
	defer l.sweptMu.Unlock()
	if len(l.swept) == 0 {
		return nil
	}
	c := l.swept[0]
	l.swept = l.swept[1:]
	return c
}

// Close is idempotent: Serve closes the listener again after a drain.
func (l *drainListener) Close() error {
	l.closeOnce.Do(func() {
		if l.draining.Load() {
			// The Accept that saw the backlog empty may have run a while ago (a goroutine waits to be
			// scheduled on a busy machine): take what queued since, in the instant before the close.
			c := sweep(l.TCPListener)
			l.sweptMu.Lock()
			l.swept = append(l.swept, c...)
			l.sweptMu.Unlock()
		}
		l.closeErr = l.TCPListener.Close()
		close(l.drained)
	})
	return l.closeErr
}
