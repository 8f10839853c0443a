package app

import (
	"net"
	"sync"
)

// limitListener accepts at most cap(slots) connections at once. Accept waits for a slot before it
// accepts, so connections beyond the limit wait in the kernel's listen backlog (and the client's connect
// timeout) instead of being accepted and starved; a slot is freed when its connection is closed.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{} // ends an Accept waiting for a slot, so Serve returns on Close
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back on the first Close; net/http may close a connection more than once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
