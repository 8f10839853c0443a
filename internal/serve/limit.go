package serve

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// minEvictIdle is how long a connection must have been idle before a new one may take its slot: a
// client that has just connected, or just had its answer, gets this long to send its request.
const minEvictIdle = 100 * time.Millisecond

// minEvictStuck is how long a write must have been blocked (the client is not reading: its socket
// buffers are full) before a new connection may take that connection's slot.
const minEvictStuck = time.Second

// limitListener accepts at most cap(slots) connections at once. Past the limit, a connection that has
// arrived takes the slot of the connection idle the longest (a keep-alive connection between requests,
// or one that has sent nothing since it connected), which is closed, as its idle timeout would; when none
// has been idle for minEvictIdle, it waits until one has or until a connection closes. Connections beyond
// that one wait in the kernel's listen backlog (and the client's connect timeout) instead of being
// accepted and starved. Failing an idle one, it takes the slot of a connection whose answer has been
// stuck in a write for minEvictStuck (a client that does not read; http.write_timeout would cut it
// later). So clients that hold connections without using them cannot lock others out; connections busy
// with a request otherwise are never cut (the read timeouts and http.write_timeout bound those).
//
// With no limit (http.max_connections 0, slots nil) it only tracks the connections, for the
// shutdown's drain (unread).
type limitListener struct {
	net.Listener
	slots     chan struct{} // nil: no limit
	closed    chan struct{} // ends an Accept waiting for a slot, so Serve returns on Close
	closeOnce sync.Once

	mu    sync.Mutex
	conns map[*limitConn]struct{} // every connection accepted and not closed
	epoch time.Time
}

// now is the monotonic time since the listener was made, never 0 (which means "none"): one clock
// read of the monotonic clock, where time.Now reads the wall clock too, and it runs per request.
func (l *limitListener) now() int64 { return int64(time.Since(l.epoch)) + 1 }

// newLimitListener limits l to n connections at once; n 0: no limit.
func newLimitListener(l net.Listener, n int) *limitListener {
	ll := &limitListener{Listener: l, closed: make(chan struct{}), conns: map[*limitConn]struct{}{}, epoch: time.Now()}
	if n > 0 {
		ll.slots = make(chan struct{}, n)
	}
	return ll
}

func (l *limitListener) Accept() (net.Conn, error) {
	if l.slots == nil {
		return l.accept()
	}
	select {
	case l.slots <- struct{}{}:
		return l.accept()
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	// Full: take the connection that is waiting, then find it a slot.
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	t := time.NewTicker(minEvictIdle)
	defer t.Stop()
	for {
		l.evictIdle()
		select {
		case l.slots <- struct{}{}:
			return l.wrap(c), nil
		case <-l.closed:
			_ = c.Close()
			return nil, net.ErrClosed
		case <-t.C: // look for an idle connection again
		}
	}
}

// accept takes the next connection, its slot (if any) held already: on failure it gives the slot back.
func (l *limitListener) accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		if l.slots != nil {
			<-l.slots
		}
		return nil, err
	}
	return l.wrap(c), nil
}

func (l *limitListener) wrap(c net.Conn) net.Conn {
	lc := &limitConn{Conn: c, l: l}
	lc.idleSince.Store(l.now()) // until net/http reports it active
	lc.unread.Store(true)
	l.mu.Lock()
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	return lc
}

// evictIdle closes the connection idle the longest, if it has been idle for minEvictIdle, else the one
// stuck in a write the longest, if for minEvictStuck.
func (l *limitListener) evictIdle() {
	l.mu.Lock()
	var oldest *limitConn
	var since int64
	for c := range l.conns {
		if t := c.idleSince.Load(); t != 0 && (oldest == nil || t < since) {
			oldest, since = c, t
		}
	}
	if oldest == nil || time.Duration(l.now()-since) < minEvictIdle {
		oldest = nil
		var stuck int64
		for c := range l.conns {
			if w := c.writing.Load(); w != 0 && (stuck == 0 || w < stuck) {
				oldest, stuck = c, w
			}
		}
		if oldest == nil || time.Duration(l.now()-stuck) < minEvictStuck {
			l.mu.Unlock()
			return
		}
	}
	oldest.idleSince.Store(0) // not chosen again while it closes
	l.mu.Unlock()
	_ = oldest.Close()
}

// setIdle runs twice per request (net/http's ConnState): an atomic store on the connection, not the
// listener's lock and a map update, which every connection's requests contended for.
func (l *limitListener) setIdle(c *limitConn, idle bool) {
	if idle {
		c.idleSince.Store(l.now())
	} else {
		c.idleSince.Store(0)
	}
}

// openConns is how many accepted connections are not closed yet.
func (l *limitListener) openConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// connState is the http.Server's ConnState hook: it tells the listener which connections are idle.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		l.setIdle(lc, true)
	default: // active, hijacked, closed
		l.setIdle(lc, false)
	}
	lc.unread.Store(st == http.StateNew || st == http.StateIdle)
}

// unread is how many connections have no request being served: accepted and nothing read yet
// (StateNew), or waiting for their next request after an answer (StateIdle). Once http.Server.Shutdown
// has begun, net/http closes such a connection when its next request arrives, unanswered.
func (l *limitListener) unread() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.conns {
		if c.unread.Load() {
			n++
		}
	}
	return n
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back on the first Close; net/http may close a connection more than once.
type limitConn struct {
	net.Conn
	l         *limitListener
	once      sync.Once
	writing   atomic.Int64 // when the Write under way began (limitListener.now); 0: none
	idleSince atomic.Int64 // since when it has been idle (limitListener.now); 0: active or closed
	unread    atomic.Bool  // no request being served: nothing read yet, or idle after an answer
}

func (c *limitConn) Write(p []byte) (int, error) {
	c.writing.Store(c.l.now())
	n, err := c.Conn.Write(p)
	c.writing.Store(0)
	return n, err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.idleSince.Store(0)
		c.l.mu.Unlock()
		if c.l.slots != nil {
			<-c.l.slots
		}
	})
	return err
}
