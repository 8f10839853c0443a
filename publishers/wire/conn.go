// Package wire is the connection core the pipelining publishers share: commands queue in
// order, one writer goroutine per connection sends everything queued in one write, a read loop matches
// the broker's answers to the waiting callbacks (in order, or by id), and any failure fails every
// outstanding command at once. A command whose deadline passes before it is written is dropped, never
// written, and what waits unwritten is bounded (MaxQueuedBytes). The protocols supply framing and
// answer classification only.
//
// Why a writer goroutine: one write per command under a mutex made write syscalls a third of mqtarget's
// CPU. Here a handler only appends its frames to the connection's buffer; the writer yields once
// (runtime.Gosched) before taking the buffer, so handlers already running get to append too, and sends
// the lot with one Write. There is no timer: an idle connection's first command leaves at once.
package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what a protocol tells the core about a connection.
type Config struct {
	// Name is the broker family, for log messages.
	Name string
	// Read reads the next frame from r and classifies it. An error ends the connection.
	Read func(r *bufio.Reader) (Answer, error)
	// MaxWait bounds how long a command without a deadline (async publishes) may go unanswered.
	MaxWait time.Duration
	// StallGrace: the connection fails when its oldest command is unanswered this long past its deadline.
	StallGrace time.Duration
	// IdleTimeout is the read deadline with nothing outstanding (the broker's heart-beats bound it);
	// 0 means none.
	IdleTimeout time.Duration
	// HeartBeat, when positive, writes HeartBeatFrame if nothing else was written for about that long.
	HeartBeat      time.Duration
	HeartBeatFrame []byte
	// CloseWait is how long Close waits for the answers to commands already written before it fails
	// them: a broker that is still working answers them (callers learn the real outcome), and it never
	// writes an answer to a socket we closed (Artemis 2.40 then stalls a thread for 10 s, and with it
	// the connections that thread serves).
	CloseWait time.Duration
	// Goodbye is written by Close, best effort within a second (a protocol's DISCONNECT); nil writes nothing.
	Goodbye []byte
	// Unavailable and Closed are the error kinds callbacks get when the connection breaks or is closed,
	// and Send's when it refuses a command (Unavailable also when too much is queued: MaxQueuedBytes).
	Unavailable, Closed error
	// Timeout is the error kind of a command dropped unwritten because its deadline passed while it was
	// queued (its caller has gone: it timed out, and it is certainly not stored); nil uses Unavailable.
	Timeout error
	// ProtocolError, when set, is called once when the connection fails for a protocol violation (an
	// error wrapping ErrProtocol), before any outstanding command's callback runs: the protocol counts it
	// and logs it (the core then logs the failure at debug level only). It must be quick.
	ProtocolError func(err error)
	Log           *slog.Logger
}

// AnswerKind says which command a frame answers.
type AnswerKind uint8

const (
	// None: the frame answers no command (a heart-beat, an informational frame).
	None AnswerKind = iota
	// Next: the frame answers the oldest outstanding command (a protocol that answers in order).
	Next
	// ByID: the frame answers the command with sequence number ID (receipt ids).
	ByID
)

// Answer is one frame from the broker, classified by the protocol.
type Answer struct {
	Kind AnswerKind
	ID   uint64
	// Err is the answered command's outcome; nil means acknowledged.
	Err error
	// Reply is queued for writing, as is (a protocol that answers heart-beats).
	Reply []byte
	// Close, when set, ends the connection after this frame: every other outstanding command fails
	// with Close as is (the protocol chooses its kind).
	Close error
}

// ErrProtocol marks a protocol violation: the broker sent what no correct broker sends (a malformed or
// unexpected frame, an answer with nothing outstanding, to a command not yet written, or to one already
// answered). Nothing it says can be believed then: the connection is closed and every outstanding command
// fails as unavailable, never as acknowledged. Protocols wrap it in the errors of their Read.
var ErrProtocol = errors.New("broker protocol violation")

// ErrExpired is the callback's error for a command whose deadline passed before the writer got to it: it
// is dropped, never written, so its outcome is certain (not stored), and the connection is not failed.
var ErrExpired = errors.New("deadline passed while queued: dropped, never written to the broker")

// ErrBacklog is Send's error, with the Unavailable kind, when the connection already holds
// MaxQueuedBytes or MaxQueuedCommands not yet written (the broker is not taking them): nothing is queued.
var ErrBacklog = errors.New("too much queued for the broker on this connection: refused, not sent")

// Bounds on what one connection holds queued but not yet written. Without them a broker that stops
// reading lets every caller pile its frames up behind the blocked write for up to MaxWait (30 s), GiBs
// with 1 MiB bodies. A command is refused only when this much is waiting already, so one of any size
// passes alone (message.max_size is at most 64 MiB). At full speed the queue holds what arrives during
// one write: 32 MiB is 27 ms at 10 Gbit/s, and 6 times the largest of the brokers' default limits on a
// request (5 MiB; their message limits are 1-4 MiB); queued commands whose callers left are dropped
// before a command is refused. The count bounds the callbacks held for small messages (64 Ki commands
// is ~100 ms of a fast broker's rate on one connection).
const (
	MaxQueuedBytes    = 32 << 20
	MaxQueuedCommands = 64 << 10
)

// ErrStalled fails a connection whose oldest command stayed unanswered past its caller's deadline and the
// grace: without it a frozen broker would pile up callbacks until a long read timeout.
var ErrStalled = errors.New("broker left a command unanswered past its deadline")

// Conn is one pipelined broker connection. Its goroutines (writer, reader) are owned by it: Close
// waits for both.
type Conn struct {
	nc  net.Conn
	cfg Config

	mu      sync.Mutex
	queued  []byte    // frames waiting for the writer
	spans   []span    // the commands in queued, in order (raw bytes lie between them)
	batchBy time.Time // earliest deadline among the commands in queued
	pending []entry   // outstanding commands, oldest first, from pending[off]; it has sequence number head
	off     int
	head    uint64
	next    uint64        // sequence number of the next command
	written uint64        // sequence number of the last command the writer took: later ones are still queued
	writing uint64        // sequence number of the last command whose write started (writing <= written)
	seen    uint64        // writing as the last read from the connection returned (seen <= writing)
	live    int           // entries in pending whose done is still set
	idle    chan struct{} // set by Close while it waits; closed when live drops to 0
	closing bool
	broken  error // the write that failed; the read loop still takes the answers already sent
	failed  bool  // fail ran
	cause   error // what fail ran with
	// maxQueued and maxSpans bound queued and spans: MaxQueuedBytes, MaxQueuedCommands (tests lower them).
	maxQueued, maxSpans int

	shutdown bool          // under mu: Close came to a live connection, our own shutdown
	dead     atomic.Bool   // no new commands: the connection failed, or its write side broke
	quit     chan struct{} // closed by fail: the writer stops
	readDone chan struct{} // closed when the read loop ends
	wake     chan struct{} // the writer has something to send
	wsem     chan struct{} // held around every write, so Close's goodbye never interleaves with a batch

	closeOnce sync.Once
	wg        sync.WaitGroup
	writes    atomic.Uint64 // writes done, for tests and benchmarks
	commands  atomic.Uint64 // commands queued
}

type entry struct {
	done func(error)
	by   time.Time
}

// span is one command's bytes in queued, queued[from:to].
type span struct {
	seq      uint64
	from, to int
}

// New starts the writer and read loop on nc, which has finished its handshake.
func New(nc net.Conn, cfg Config) *Conn {
	c := &Conn{
		nc:        nc,
		cfg:       cfg,
		next:      1,
		head:      1,
		maxQueued: MaxQueuedBytes,
		maxSpans:  MaxQueuedCommands,
		quit:      make(chan struct{}),
		readDone:  make(chan struct{}),
		wake:      make(chan struct{}, 1),
		wsem:      make(chan struct{}, 1),
	}
	c.arm()
	c.wg.Add(2)
	go c.writeLoop()
	go c.readLoop()
	return c
}

// Dead reports whether the connection failed or was closed.
func (c *Conn) Dead() bool { return c.dead.Load() }

// Err is what the connection failed with, nil while it has not failed: a redial's error names why the
// last connection ended (a protocol violation, the broker's close).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// RemoteAddr is the broker's address.
func (c *Conn) RemoteAddr() string { return c.nc.RemoteAddr().String() }

// Stats returns the writes done and commands queued so far.
func (c *Conn) Stats() (writes, commands uint64) { return c.writes.Load(), c.commands.Load() }

// Send queues one command: enc appends its frames to b; id is the command's sequence number, which a
// protocol matching answers by id puts into the frames. by is when the caller stops waiting (zero:
// MaxWait from now): a command still queued then is dropped unwritten, its done getting ErrExpired
// with the Timeout kind. done is called exactly once with the answer or the connection's failure, unless
// Send returns an error; it runs on the read loop (or on whoever fails the connection or drops expired
// commands, Send's caller included), so it must be quick. enc runs under the connection's lock. Send
// refuses (ErrBacklog, Unavailable) when MaxQueuedBytes or MaxQueuedCommands are waiting already.
func (c *Conn) Send(by time.Time, enc func(b []byte, id uint64) []byte, done func(error)) error {
	now := time.Now()
	if limit := now.Add(c.cfg.MaxWait); by.IsZero() || by.After(limit) {
		by = limit
	} else if by.Before(now) {
		by = now
	}
	c.mu.Lock()
	if c.closing && c.shutdown {
		c.mu.Unlock()
		return kind(c.cfg.Closed, errors.New("connection closing"))
	}
	if c.dead.Load() || c.closing {
		c.mu.Unlock()
		return kind(c.cfg.Unavailable, errors.New("connection closed"))
	}
	if len(c.queued) >= c.maxQueued || len(c.spans) >= c.maxSpans {
		// Commands whose callers left make room first; only live ones refuse a caller.
		expired := c.expire(now)
		if len(c.queued) >= c.maxQueued || len(c.spans) >= c.maxSpans {
			queued, n := len(c.queued), len(c.spans)
			c.mu.Unlock()
			c.expired(expired)
			return kind(c.cfg.Unavailable, fmt.Errorf("%w (%d bytes in %d commands waiting)", ErrBacklog, queued, n))
		}
		defer c.expired(expired) // after the unlock below
	}
	id := c.next
	c.next++
	wasIdle := len(c.queued) == 0
	from := len(c.queued)
	c.queued = enc(c.queued, id)
	c.spans = append(c.spans, span{seq: id, from: from, to: len(c.queued)})
	if c.batchBy.IsZero() || by.Before(c.batchBy) {
		c.batchBy = by
	}
	if c.live == 0 {
		// The read loop may be waiting with the idle deadline; now this command bounds it.
		_ = c.nc.SetReadDeadline(by.Add(c.cfg.StallGrace))
	}
	if c.off > 0 && len(c.pending) == cap(c.pending) {
		// Reuse the answered front instead of growing the array.
		n := copy(c.pending, c.pending[c.off:])
		clear(c.pending[n:])
		c.pending, c.off = c.pending[:n], 0
	}
	c.pending = append(c.pending, entry{done: done, by: by})
	c.live++
	c.mu.Unlock()
	c.commands.Add(1)
	if wasIdle {
		c.signal()
	}
	return nil
}

// queueRaw queues bytes that expect no answer (heart-beats, NOP).
func (c *Conn) queueRaw(b []byte) {
	c.mu.Lock()
	wasIdle := len(c.queued) == 0
	if !c.closing && !c.failed {
		c.queued = append(c.queued, b...)
	}
	c.mu.Unlock()
	if wasIdle {
		c.signal()
	}
}

func (c *Conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending already; the writer will take our bytes with it
	}
}

// writeLoop sends what is queued, many commands per write, until the connection fails or closes.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	var tick <-chan time.Time
	if c.cfg.HeartBeat > 0 {
		// Ticking at half the interval and writing when nothing else was written since the last tick
		// keeps every silence under the interval.
		t := time.NewTicker(max(c.cfg.HeartBeat/2, time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	var (
		out   []byte
		wrote bool
	)
	for {
		select {
		case <-c.quit:
			return
		case <-tick:
			if !wrote {
				c.queueRaw(c.cfg.HeartBeatFrame)
			}
			wrote = false
			continue
		case <-c.wake:
		}
		// Handlers already running get to queue their commands into this write: fuller writes, fewer
		// syscalls, and no timer delaying a lone command.
		runtime.Gosched()
		c.mu.Lock()
		// Commands whose callers have left are dropped, not written: their outcome stays certain (not
		// stored), and their deadlines, past already, do not become the write's.
		expired := c.expire(time.Now())
		out, c.queued = c.queued, out[:0]
		c.spans = c.spans[:0]
		c.written = c.next - 1
		taken := c.written
		by := c.batchBy // the earliest deadline of the commands written, all still ahead
		c.batchBy = time.Time{}
		c.mu.Unlock()
		c.expired(expired)
		if len(out) == 0 {
			continue
		}
		if by.IsZero() { // only raw bytes
			by = time.Now().Add(c.cfg.MaxWait)
		}
		c.wsem <- struct{}{}
		if c.dead.Load() {
			<-c.wsem
			return
		}
		// One deadline per gathered write: a write still blocked past the earliest caller's deadline
		// and the grace means the broker stopped reading.
		_ = c.nc.SetWriteDeadline(by.Add(c.cfg.StallGrace))
		c.mu.Lock()
		c.writing = taken // an answer to a later command answers what the broker cannot have seen
		c.mu.Unlock()
		_, err := c.nc.Write(out)
		<-c.wsem
		if err != nil {
			if isTimeout(err) {
				c.fail(kind(c.cfg.Unavailable, fmt.Errorf("%w (write blocked): %v", ErrStalled, err)))
				return
			}
			c.breakWrites(err)
			return
		}
		c.writes.Add(1)
		wrote = true
		if cap(out) > 1<<20 {
			out = nil // don't pin a buffer sized for a few huge messages
		}
	}
}

// expire drops the queued commands whose deadline is not after now: their entries leave pending, their
// bytes leave queued, and their callbacks are returned for c.expired to run once mu is released. It
// runs under mu.
func (c *Conn) expire(now time.Time) []func(error) {
	if c.batchBy.IsZero() || c.batchBy.After(now) {
		return nil // batchBy is the earliest deadline queued: none has passed
	}
	var (
		dones []func(error)
		w     = -1 // where the kept bytes go, from the first dropped command on
		last  int  // end of the last command handled: the raw bytes after it are kept
		kept  = c.spans[:0]
	)
	c.batchBy = time.Time{}
	for _, s := range c.spans {
		e := &c.pending[c.off+int(s.seq-c.head)]
		if w >= 0 {
			w += copy(c.queued[w:], c.queued[last:s.from]) // raw bytes between commands
		}
		if !e.by.After(now) {
			dones = append(dones, e.done)
			*e = entry{}
			c.live--
			if w < 0 {
				w = s.from
			}
			last = s.to
			continue
		}
		if w >= 0 {
			n := copy(c.queued[w:], c.queued[s.from:s.to])
			s.from, s.to, w = w, w+n, w+n
		}
		last = s.to
		kept = append(kept, s)
		if c.batchBy.IsZero() || e.by.Before(c.batchBy) {
			c.batchBy = e.by
		}
	}
	if w >= 0 {
		w += copy(c.queued[w:], c.queued[last:])
		clear(c.queued[w:]) // no stale frames left in the buffer's spare capacity
		c.queued = c.queued[:w]
	}
	c.spans = kept
	c.trim()
	if len(dones) > 0 {
		if c.live == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
		// The read deadline may be a dropped command's; a dropped command is no reason to wait for the
		// broker, nor to find it silent.
		c.armLocked()
	}
	return dones
}

// expired runs the callbacks of the commands expire dropped, with mu released.
func (c *Conn) expired(dones []func(error)) {
	if len(dones) == 0 {
		return
	}
	k := c.cfg.Timeout
	if k == nil {
		k = c.cfg.Unavailable
	}
	err := kind(k, ErrExpired)
	for _, done := range dones {
		done(err)
	}
}

// breakWrites stops the connection taking commands after a failed write, but leaves it to the read
// loop to fail what is outstanding: a broker that refuses a command and closes the connection while it
// is being written (a broker refusing an oversize message) has answered the commands before it, and those
// answers are still to be read. The read loop gets at most the grace to read them.
func (c *Conn) breakWrites(err error) {
	c.mu.Lock()
	c.broken = err
	c.dead.Store(true)
	_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.StallGrace))
	c.mu.Unlock()
}

// readLoop runs the callbacks of answers until the connection ends.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer close(c.readDone)
	r := bufio.NewReaderSize(sampler{c}, 16<<10)
	for {
		if r.Buffered() == 0 {
			c.arm()
		}
		a, err := c.cfg.Read(r)
		if err != nil {
			c.mu.Lock()
			outstanding, broken := c.live, c.broken
			c.mu.Unlock()
			switch {
			case broken != nil:
				err = fmt.Errorf("write failed: %w (then read: %v)", broken, err)
			case errors.Is(err, ErrProtocol):
				c.protocolError(err)
			case isTimeout(err):
				if outstanding > 0 {
					err = fmt.Errorf("%w: %v", ErrStalled, err)
				} else {
					err = fmt.Errorf("broker silent too long (heart-beats overdue): %w", err)
				}
			case outstanding > 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
				// a bare "EOF" told the caller nothing (a broker may end the connection so instead
				// of refusing a command: docs of the broker packages say which)
				err = fmt.Errorf("the broker closed the connection before answering: %w", err)
			}
			c.fail(kind(c.cfg.Unavailable, err))
			return
		}
		if a.Reply != nil {
			c.queueRaw(a.Reply)
		}
		if a.Kind != None {
			if err := c.answer(a); err != nil {
				c.protocolError(err)
				c.fail(kind(c.cfg.Unavailable, err))
				return
			}
		}
		if a.Close != nil {
			c.fail(a.Close)
			return
		}
	}
}

// sampler reads the connection for the read loop and notes, as each read returns, which commands had
// started to be written: an answer in bytes read before its command's write started came ahead of it.
// One read often holds several answers, and their callbacks run as each is parsed: a broker sending its
// answer to a command with a second one guessed for the next lets that next command be sent and written
// before the read loop parses the guess, which would then look like its answer (the bytes were here
// first). Bytes that arrive during a read are only known to have arrived by its return, so the note is
// taken then.
type sampler struct{ c *Conn }

func (s sampler) Read(b []byte) (int, error) {
	n, err := s.c.nc.Read(b)
	s.c.mu.Lock()
	s.c.seen = s.c.writing
	s.c.mu.Unlock()
	return n, err
}

// arm sets the read deadline: the oldest outstanding command's deadline plus the grace, else the idle
// bound. It runs under mu so that it and Send's arming are ordered.
func (c *Conn) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
}

func (c *Conn) armLocked() {
	switch {
	case c.broken != nil: // breakWrites set the deadline
	case c.live > 0:
		_ = c.nc.SetReadDeadline(c.pending[c.off].by.Add(c.cfg.StallGrace))
	case c.cfg.IdleTimeout > 0:
		_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
	default:
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

// answer runs the callback of the command a names. An answer that names no outstanding command whose
// write had started when the answer was read (sampler) is a protocol violation (returned, nothing
// run): a broker that answers ahead, twice, or for nothing would otherwise acknowledge commands it
// never saw. (An answer to a command whose write is under way is believed: the broker may answer the
// bytes it got before our Write returns, and waiting for the write would stop the read loop, which
// could leave a broker blocked on its answers and our write blocked on it.)
func (c *Conn) answer(a Answer) error {
	c.mu.Lock()
	if c.failed { // everything outstanding has been failed already: nothing to answer, nothing to blame
		c.mu.Unlock()
		return nil
	}
	q := c.pending[c.off:]
	seq := c.head // Next: q[0] is always outstanding (answered entries are trimmed from the front)
	if a.Kind == ByID {
		seq = a.ID
	}
	i := seq - c.head // wraps to a huge value for ids already trimmed
	var bad error
	switch {
	case a.Kind == ByID && (seq == 0 || seq >= c.next):
		bad = fmt.Errorf("%w: answer to command %d, never sent", ErrProtocol, seq)
	case i >= uint64(len(q)) || q[i].done == nil:
		if a.Kind == ByID {
			bad = fmt.Errorf("%w: answer to command %d, not outstanding", ErrProtocol, seq)
		} else {
			bad = fmt.Errorf("%w: answer with no command outstanding", ErrProtocol)
		}
	case seq > c.seen:
		bad = fmt.Errorf("%w: answer to command %d, read before its write started", ErrProtocol, seq)
	}
	if bad != nil {
		c.mu.Unlock()
		return bad
	}
	done := q[i].done
	q[i] = entry{}
	c.live--
	c.trim()
	if c.live == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	if a.Close != nil {
		// Before the callback runs, so its caller's next command goes to a new connection.
		c.dead.Store(true)
	}
	c.mu.Unlock()
	done(a.Err)
	return nil
}

// protocolError reports a violation to the protocol's hook, once per connection (it fails right after).
func (c *Conn) protocolError(err error) {
	if c.cfg.ProtocolError != nil {
		c.cfg.ProtocolError(err)
	}
}

// trim drops answered entries from the front, so pending[off] is the oldest outstanding command.
func (c *Conn) trim() {
	for c.off < len(c.pending) && c.pending[c.off].done == nil {
		c.off++
		c.head++
	}
	if c.off == len(c.pending) {
		c.pending, c.off = c.pending[:0], 0
	}
}

// fail closes the connection and fails every outstanding command with err; later calls do nothing.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.failed {
		c.mu.Unlock()
		return
	}
	c.failed = true
	c.cause = err
	c.dead.Store(true)
	close(c.quit)
	pending := c.pending
	c.pending, c.off, c.live, c.queued, c.spans, c.batchBy = nil, 0, 0, nil, nil, time.Time{}
	c.mu.Unlock()
	_ = c.nc.Close()
	n := 0
	for _, p := range pending {
		if p.done != nil {
			n++
		}
	}
	switch {
	case errors.Is(err, c.cfg.Closed):
	case errors.Is(err, ErrProtocol) && c.cfg.ProtocolError != nil:
		// The protocol's hook logged it (once per host: a misbehaving broker fails every connection).
		c.cfg.Log.Debug(c.cfg.Name+" connection closed after a protocol violation", "addr", c.RemoteAddr(), "pending", n, "err", err)
	case n > 0:
		c.cfg.Log.Warn(c.cfg.Name+" connection lost with commands pending", "addr", c.RemoteAddr(), "pending", n, "err", err)
	default:
		c.cfg.Log.Debug(c.cfg.Name+" connection lost", "addr", c.RemoteAddr(), "err", err)
	}
	for _, p := range pending {
		if p.done != nil {
			p.done(err)
		}
	}
}

// Close fails the commands queued but not yet written with the Closed kind (they are dropped, so the
// broker never sees a command whose caller was told it failed), waits up to CloseWait for the answers
// to those written, writes the goodbye (best effort, within a second), fails what is still outstanding
// with the Closed kind (the Unavailable kind when a write had failed: the broker broke it), and waits
// for the connection's goroutines. Close is idempotent, and a
// concurrent call returns only once the first has done all this.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		closed := kind(c.cfg.Closed, errors.New("connection closed"))
		c.mu.Lock()
		if c.broken != nil {
			// A broken connection being replaced (or closed with its publisher): what it still holds
			// failed because the broker's side broke, not because we are shutting down.
			closed = kind(c.cfg.Unavailable, fmt.Errorf("connection closed after a failed write: %w", c.broken))
		}
		c.closing = true
		// A connection that failed first is retired (the pool does that before redialling): a Send
		// reaching it meets the broker's failure, not a shutdown.
		c.shutdown = !c.failed
		expired := c.expire(time.Now()) // their callers left: a timeout, as had the writer got to them
		unsent := c.takeUnsent()
		c.queued, c.spans, c.batchBy = nil, nil, time.Time{}
		var idle chan struct{}
		if c.live > 0 && !c.failed && c.cfg.CloseWait > 0 {
			idle = make(chan struct{})
			c.idle = idle
		}
		c.mu.Unlock()
		c.expired(expired)
		for _, done := range unsent {
			done(closed)
		}
		if idle != nil {
			// The read loop takes the answers: after a broken write, those the broker sent before it
			// closed; on a live connection, those to everything written.
			t := time.NewTimer(c.cfg.CloseWait)
			select {
			case <-idle:
			case <-c.readDone:
			case <-t.C:
			}
			t.Stop()
		}
		if c.cfg.Goodbye != nil && !c.dead.Load() {
			select {
			case c.wsem <- struct{}{}:
				if !c.dead.Load() {
					_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
					_, _ = c.nc.Write(c.cfg.Goodbye)
				}
				<-c.wsem
			case <-time.After(time.Second): // a write is stuck; fail below unblocks it
			}
		}
		c.fail(closed)
		c.wg.Wait()
	})
}

// takeUnsent removes the commands the writer has not taken (sequence numbers after written) from
// pending and returns their callbacks. It runs under mu.
func (c *Conn) takeUnsent() []func(error) {
	var dones []func(error)
	q := c.pending[c.off:]
	for i := range q {
		if c.head+uint64(i) > c.written && q[i].done != nil {
			dones = append(dones, q[i].done)
			q[i] = entry{}
			c.live--
		}
	}
	c.trim()
	return dones
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// kindError attaches an error kind to a cause, keeping both visible to errors.Is.
type kindError struct{ kind, err error }

func (e *kindError) Error() string   { return e.kind.Error() + ": " + e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

func kind(k, err error) error {
	if k == nil || errors.Is(err, k) {
		return err
	}
	return &kindError{kind: k, err: err}
}
