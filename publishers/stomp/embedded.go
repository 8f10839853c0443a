package stomp

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
	"github.com/go-stomp/stomp/v3/server"

	"go.uber.org/goleak"
)

// Server is a set of in-process go-stomp servers listening on 127.0.0.1 ephemeral ports. They keep
// messages sent to /queue/... destinations in memory until a subscriber takes them (queue semantics),
// up to maxBytes per server, beyond which the oldest messages of the queue are dropped (a load test
// without consumers must not exhaust memory); /topic/... messages reach only current subscribers. They
// accept any login.
type Server struct {
	lns   []*trackingListener
	addrs []string
	once  sync.Once
}

// StartServer starts n servers, each holding at most maxBytes of queued messages.
func StartServer(n int, maxBytes int64, log *slog.Logger) (_ *Server, err error) {
	e := &Server{}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("embedded stomp: %w", err)
		}
		tl := &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}}
		e.lns = append(e.lns, tl)
		e.addrs = append(e.addrs, l.Addr().String())
		slg := log.With("embedded_stomp", l.Addr().String())
		srv := &server.Server{
			HeartBeat:    10 * time.Second,
			Log:          stompLogger{slg},
			QueueStorage: newBoundedQueues(maxBytes, slg),
		}
		// Serve returns only when the listener fails; its request processor goroutine stays parked
		// after Close (go-stomp has no shutdown), holding only the in-memory queues.
		go func() { _ = srv.Serve(tl) }()
	}
	return e, nil
}

// Addrs returns the servers' STOMP addresses.
func (e *Server) Addrs() []string { return e.addrs }

// Close stops accepting and closes every client connection.
func (e *Server) Close() error {
	e.once.Do(func() {
		for _, l := range e.lns {
			l.closeAll()
		}
	})
	return nil
}

// trackingListener remembers accepted connections so Close can end them: go-stomp's server cannot.
type trackingListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[c] = struct{}{}
	return &trackedConn{Conn: c, l: l}, nil
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	_ = l.Listener.Close()
	for c := range conns {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c.Conn)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// stompLogger sends go-stomp's server log to slog. It logs every client disconnect as an error, so
// errors go to debug as well; warnings stay warnings.
type stompLogger struct{ log *slog.Logger }

func (l stompLogger) logf(level slog.Level, format string, args ...any) {
	if l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, fmt.Sprintf(format, args...))
	}
}

func (l stompLogger) Debugf(format string, v ...any)   { l.logf(slog.LevelDebug, format, v...) }
func (l stompLogger) Infof(format string, v ...any)    { l.logf(slog.LevelDebug, format, v...) }
func (l stompLogger) Warningf(format string, v ...any) { l.logf(slog.LevelWarn, format, v...) }
func (l stompLogger) Errorf(format string, v ...any)   { l.logf(slog.LevelDebug, format, v...) }
func (l stompLogger) Debug(msg string)                 { l.logf(slog.LevelDebug, "%s", msg) }
func (l stompLogger) Info(msg string)                  { l.logf(slog.LevelDebug, "%s", msg) }
func (l stompLogger) Warning(msg string)               { l.logf(slog.LevelWarn, "%s", msg) }
func (l stompLogger) Error(msg string)                 { l.logf(slog.LevelDebug, "%s", msg) }

// boundedQueues is go-stomp's in-memory queue storage with a byte budget. go-stomp calls it from one
// goroutine only (its request processor), and sends the RECEIPT before it enqueues, so a message over
// budget cannot be refused: the oldest of its queue are dropped instead, and counted in a warning.
type boundedQueues struct {
	max, bytes int64
	lists      map[string]*list.List
	dropped    map[string]int64
	lastWarn   time.Time
	log        *slog.Logger
}

func newBoundedQueues(max int64, log *slog.Logger) *boundedQueues {
	return &boundedQueues{max: max, lists: map[string]*list.List{}, dropped: map[string]int64{}, log: log}
}

// Bookkeeping of a queued frame beside its bytes: the Frame, its Header and list.Element (about 150
// bytes), and per header the two string headers in its slice. A budget of small frames is mostly this.
const (
	frameOverhead  = 160
	headerOverhead = 32
)

// frameSize is the memory a queued frame takes, about: its bytes and their bookkeeping.
func frameSize(f *frame.Frame) int64 {
	n := int64(frameOverhead + len(f.Command) + cap(f.Body))
	for i := range f.Header.Len() {
		k, v := f.Header.GetAt(i)
		n += int64(headerOverhead + len(k) + len(v))
	}
	return n
}

func (q *boundedQueues) list(queue string) *list.List {
	l, ok := q.lists[queue]
	if !ok {
		l = list.New()
		q.lists[queue] = l
	}
	return l
}

func (q *boundedQueues) Enqueue(queue string, f *frame.Frame) error {
	l := q.list(queue)
	l.PushBack(f)
	q.bytes += frameSize(f)
	for q.bytes > q.max && l.Len() > 0 {
		q.bytes -= frameSize(l.Remove(l.Front()).(*frame.Frame))
		q.dropped[queue]++
	}
	if len(q.dropped) > 0 && time.Since(q.lastWarn) > 10*time.Second {
		q.lastWarn = time.Now()
		q.log.Warn("embedded STOMP server over its memory budget: dropped the oldest queued messages (stomp.embedded_max_bytes)",
			"dropped", q.dropped, "max_bytes", q.max)
		q.dropped = map[string]int64{}
	}
	return nil
}

func (q *boundedQueues) Requeue(queue string, f *frame.Frame) error {
	q.list(queue).PushFront(f)
	q.bytes += frameSize(f)
	return nil
}

func (q *boundedQueues) Dequeue(queue string) (*frame.Frame, error) {
	l, ok := q.lists[queue]
	if !ok || l.Len() == 0 {
		return nil, nil
	}
	f := l.Remove(l.Front()).(*frame.Frame)
	q.bytes -= frameSize(f)
	if l.Len() == 0 {
		delete(q.lists, queue)
	}
	return f, nil
}

func (q *boundedQueues) Start() {}
func (q *boundedQueues) Stop()  {}

// EmbeddedGoroutines returns options ignoring the goroutines of go-stomp servers running in the test process (the embedded
// broker): their listeners start asynchronously, their per-connection goroutines end some time after
// the client left, and in v3.1.3 a read loop can stay blocked for good on a channel its process loop
// stopped reading.
func EmbeddedGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/go-stomp/stomp/v3/server.(*requestProcessor).Listen"),
		goleak.IgnoreAnyFunction("github.com/go-stomp/stomp/v3/server.(*requestProcessor).Serve"),
		goleak.IgnoreAnyFunction("github.com/go-stomp/stomp/v3/server/client.(*Conn).readLoop"),
		goleak.IgnoreAnyFunction("github.com/go-stomp/stomp/v3/server/client.(*Conn).processLoop"),
	}
}
