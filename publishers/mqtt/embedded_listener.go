package mqtt

import (
	"net"
	"sync"
	"time"
)

// An embedded server's TCP connections: mochi-mqtt v2.7.9 reads a connection's CONNECT without a
// deadline, bounds only connections that sent one (MaximumClients), and its Close waits for every
// connection's goroutine. A client that connects and says nothing would so hold a goroutine and about
// 64 KiB (the outbound queue) for ever, as many times as it likes, and hang the server's Close.
const (
	embeddedConns       = 2 * embeddedClients // TCP connections at once, CONNECT sent or not; more are closed at once
	embeddedConnectWait = 10 * time.Second    // for the CONNECT (mochi's default keep alive); its first read after it sets its own
)

// boundedListener holds a server's connections to embeddedConns, gives each connectWait for its
// CONNECT, and closes all that are left when it closes.
type boundedListener struct {
	net.Listener
	connectWait time.Duration
	slots       chan struct{} // one a connection open
	mu          sync.Mutex
	conns       map[*boundedConn]struct{}
	closed      bool
	unread      sync.WaitGroup // one a connection handed out and not yet read from
}

func newBoundedListener(l net.Listener, maxConns int, connectWait time.Duration) *boundedListener {
	return &boundedListener{Listener: l, connectWait: connectWait, slots: make(chan struct{}, maxConns), conns: map[*boundedConn]struct{}{}}
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
		default:
			_ = c.Close() // over the bound: the client sees the connection end before any CONNACK
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(l.connectWait))
		bc := &boundedConn{Conn: c, l: l}
		l.mu.Lock()
		closed := l.closed
		if !closed {
			l.conns[bc] = struct{}{}
			l.unread.Add(1) // under mu: none after Close, so waitRead never races an Add
		}
		l.mu.Unlock()
		if closed {
			_ = bc.Close()
			return nil, net.ErrClosed
		}
		return bc, nil
	}
}

// Close stops accepting and closes every connection still open, so that the server's goroutines
// reading them end.
func (l *boundedListener) Close() error {
	l.mu.Lock()
	l.closed = true
	conns := make([]*boundedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	err := l.Listener.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	return err
}

// waitRead waits, once Close returned, until every connection Accept handed out was read from.
func (l *boundedListener) waitRead() { l.unread.Wait() }

type boundedConn struct {
	net.Conn
	l        *boundedListener
	once     sync.Once
	readOnce sync.Once
}

func (c *boundedConn) Read(b []byte) (int, error) {
	c.readOnce.Do(c.l.unread.Done)
	return c.Conn.Read(b)
}

func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}
