package amqp

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeBroker is a small AMQP 0-9-1 server in the test process that can misbehave on purpose. It speaks
// just what the publisher needs: the handshake, channel.open, confirm.select, queue.declare and bind,
// basic.publish with its content, channel.close and connection.close. onPublish decides what each
// publish gets.
type fakeBroker struct {
	ln net.Listener
	// onPublish answers the publish numbered tag on its channel (1, 2, ...): write frames with w.
	onPublish func(w *fakeConn, ch uint16, tag uint64, p fakePublish)
	// silentHandshake: accept, then never answer.
	silentHandshake bool
	opts            fakeOpts
	chanOpens       atomic.Int64 // channel.open received, on every connection

	mu        sync.Mutex
	conns     []net.Conn
	got       []fakePublish // every publish read, in order
	consumers []fakeConsumer
	acks      int // basic.ack from consumers
	frozen    bool
	wg        sync.WaitGroup
}

// fakeConsumer is a basic.consume a client made.
type fakeConsumer struct {
	w    *fakeConn
	ch   uint16
	ctag string
	tag  uint64 // last delivery tag
}

// deliver sends body to every consumer; it returns how many got it.
func (f *fakeBroker) deliver(body []byte) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.consumers {
		c := &f.consumers[i]
		c.tag++
		args := shortstr(nil, c.ctag)
		args = binary.BigEndian.AppendUint64(args, c.tag)
		args = append(args, 0)
		args = shortstr(args, "")
		args = shortstr(args, "q")
		c.w.method(c.ch, 60, 60, args)
		hdr := binary.BigEndian.AppendUint16(nil, 60)
		hdr = binary.BigEndian.AppendUint16(hdr, 0)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(body)))
		hdr = binary.BigEndian.AppendUint16(hdr, 0)
		c.w.frame(2, c.ch, hdr)
		if len(body) > 0 {
			c.w.frame(3, c.ch, body)
		}
	}
	return len(f.consumers)
}

func (f *fakeBroker) consumerCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.consumers)
}

func (f *fakeBroker) ackCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acks
}

// fakeOpts are misbehaviours a fakeBroker has from its start.
type fakeOpts struct {
	// heartbeat: send a heartbeat this often from a goroutine of its own, whatever the reader does, as
	// RabbitMQ does while a resource alarm blocks a connection: the client's heartbeat timeout then
	// never ends a connection the broker no longer serves. The client must ask for an interval that
	// the heartbeats keep alive (its read deadline is 1.5 intervals).
	heartbeat time.Duration
	// ignoreClose: connection.close gets no close-ok (reading goes on).
	ignoreClose bool
	// ignoreDeclare: a queue.declare of this queue gets no answer.
	ignoreDeclare string
	// refuseLogin: start-ok is answered with connection.close 403 ACCESS_REFUSED, as RabbitMQ answers
	// a wrong password to a client that announces authentication_failure_close.
	refuseLogin bool
}

type fakePublish struct {
	exchange, key string
	mandatory     bool
	messageID     string
	body          []byte
}

func newFake(t testing.TB, onPublish func(w *fakeConn, ch uint16, tag uint64, p fakePublish)) *fakeBroker {
	return newFakeTLS(t, nil, onPublish)
}

// newFakeWith is newFake misbehaving as o says.
func newFakeWith(t testing.TB, o fakeOpts, onPublish func(w *fakeConn, ch uint16, tag uint64, p fakePublish)) *fakeBroker {
	return newFakeOpts(t, nil, o, onPublish)
}

// newFakeTLS is newFake speaking TLS with tc (nil: plain TCP).
func newFakeTLS(t testing.TB, tc *tls.Config, onPublish func(w *fakeConn, ch uint16, tag uint64, p fakePublish)) *fakeBroker {
	return newFakeOpts(t, tc, fakeOpts{}, onPublish)
}

func newFakeOpts(t testing.TB, tc *tls.Config, o fakeOpts, onPublish func(w *fakeConn, ch uint16, tag uint64, p fakePublish)) *fakeBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	f := &fakeBroker{ln: ln, onPublish: onPublish, opts: o}
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

func (f *fakeBroker) url() string { return "amqp://u:secretpw@" + f.ln.Addr().String() + "/" }

func (f *fakeBroker) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.wg.Go(func() { f.serve(c) })
	}
}

// dropAll closes every connection, as a broker killed with -9 does.
func (f *fakeBroker) dropAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns, f.consumers = nil, nil
}

// freezeAll makes every connection's reader stop, as SIGSTOP would (bytes are accepted, nothing is
// answered), until the fake closes.
func (f *fakeBroker) freezeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

func (f *fakeBroker) isFrozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

func (f *fakeBroker) close() {
	f.ln.Close()
	f.dropAll()
	f.wg.Wait()
}

func (f *fakeBroker) publishes() []fakePublish {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakePublish(nil), f.got...)
}

// fakeConn writes frames to one client.
type fakeConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (w *fakeConn) frame(typ byte, ch uint16, payload []byte) {
	b := []byte{typ, byte(ch >> 8), byte(ch)}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	b = append(b, 0xCE)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.c.Write(b)
}

func (w *fakeConn) method(ch uint16, class, id uint16, args []byte) {
	w.frame(1, ch, append(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, class), id), args...))
}

// raw writes bytes as they are (garbage).
func (w *fakeConn) raw(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.c.Write(b)
}

func (w *fakeConn) ack(ch uint16, tag uint64, multiple bool) {
	w.method(ch, 60, 80, append(binary.BigEndian.AppendUint64(nil, tag), bit(multiple)))
}

func (w *fakeConn) nack(ch uint16, tag uint64) { w.nackMultiple(ch, tag, false) }

func (w *fakeConn) nackMultiple(ch uint16, tag uint64, multiple bool) {
	w.method(ch, 60, 120, append(binary.BigEndian.AppendUint64(nil, tag), bit(multiple)))
}

// ret sends a basic.return of a message with messageID.
func (w *fakeConn) ret(ch uint16, p fakePublish, messageID string) {
	args := binary.BigEndian.AppendUint16(nil, 312)
	args = shortstr(args, "NO_ROUTE")
	args = shortstr(args, p.exchange)
	args = shortstr(args, p.key)
	w.method(ch, 60, 50, args)
	hdr := binary.BigEndian.AppendUint16(nil, 60)
	hdr = binary.BigEndian.AppendUint16(hdr, 0)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(p.body)))
	hdr = binary.BigEndian.AppendUint16(hdr, 1<<7) // message-id only
	hdr = shortstr(hdr, messageID)
	w.frame(2, ch, hdr)
	if len(p.body) > 0 {
		w.frame(3, ch, p.body)
	}
}

func bit(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func shortstr(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }

func longstr(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

var errFake = errors.New("fake: malformed")

type fakeReader struct{ r *bufio.Reader }

func (r fakeReader) frame() (typ byte, ch uint16, payload []byte, err error) {
	var h [7]byte
	if _, err = io.ReadFull(r.r, h[:]); err != nil {
		return
	}
	typ, ch = h[0], binary.BigEndian.Uint16(h[1:3])
	n := binary.BigEndian.Uint32(h[3:7])
	if n > 1<<20 {
		return 0, 0, nil, errFake
	}
	payload = make([]byte, n+1)
	if _, err = io.ReadFull(r.r, payload); err != nil {
		return
	}
	if payload[n] != 0xCE {
		return 0, 0, nil, errFake
	}
	return typ, ch, payload[:n], nil
}

// serve runs one client connection.
func (f *fakeBroker) serve(c net.Conn) {
	defer c.Close()
	r := fakeReader{bufio.NewReader(c)}
	w := &fakeConn{c: c}
	var proto [8]byte
	if _, err := io.ReadFull(r.r, proto[:]); err != nil || f.silentHandshake {
		_, _ = io.Copy(io.Discard, r.r)
		return
	}
	props := binary.BigEndian.AppendUint32(nil, 0)
	props = shortstr(props, "product")
	props = append(props, 'S')
	props = longstr(props, "FakeMQ")
	props = shortstr(props, "version")
	props = append(props, 'S')
	props = longstr(props, "0.1")
	binary.BigEndian.PutUint32(props, uint32(len(props)-4))
	start := append([]byte{0, 9}, props...)
	start = longstr(start, "PLAIN")
	start = longstr(start, "en_US")
	w.method(0, 10, 10, start)
	if f.opts.heartbeat > 0 {
		served := make(chan struct{})
		defer close(served)
		f.wg.Go(func() {
			tick := time.NewTicker(f.opts.heartbeat)
			defer tick.Stop()
			for {
				select {
				case <-served:
					return
				case <-tick.C:
					w.frame(8, 0, nil)
				}
			}
		})
	}
	tags := map[uint16]uint64{}
	var cur *fakePublish
	var curCh uint16
	var left uint64
	for {
		typ, ch, p, err := r.frame()
		if err != nil {
			return
		}
		if f.isFrozen() {
			_, _ = io.Copy(io.Discard, r.r)
			return
		}
		switch typ {
		case 8: // heartbeat
			continue
		case 2: // content header
			if cur == nil || len(p) < 14 {
				return
			}
			left = binary.BigEndian.Uint64(p[4:12])
			cur.messageID = messageID(p[12:])
			if left == 0 {
				f.published(w, curCh, tags, cur)
				cur = nil
			}
			continue
		case 3:
			if cur == nil {
				return
			}
			cur.body = append(cur.body, p...)
			left -= uint64(len(p))
			if left == 0 {
				f.published(w, curCh, tags, cur)
				cur = nil
			}
			continue
		case 1:
		default:
			return
		}
		if len(p) < 4 {
			return
		}
		class, id, args := binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]), p[4:]
		switch {
		case class == 10 && id == 11: // start-ok
			if f.opts.refuseLogin {
				closeArgs := binary.BigEndian.AppendUint16(nil, 403)
				closeArgs = shortstr(closeArgs, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN")
				w.method(0, 10, 50, append(closeArgs, 0, 0, 0, 0))
				continue // the client's close-ok, then its hang-up, end the connection
			}
			w.method(0, 10, 30, []byte{0, 0, 0, 2, 0, 0, 0, 60}) // tune: channel-max 0, frame-max 131072, heartbeat 60
		case class == 10 && id == 31: // tune-ok
		case class == 10 && id == 40: // open
			w.method(0, 10, 41, []byte{0})
		case class == 10 && id == 50: // close
			if f.opts.ignoreClose {
				continue
			}
			w.method(0, 10, 51, nil)
			return
		case class == 20 && id == 10: // channel.open
			f.chanOpens.Add(1)
			w.method(ch, 20, 11, []byte{0, 0, 0, 0})
		case class == 20 && id == 40: // channel.close
			w.method(ch, 20, 41, nil)
		case class == 85 && id == 10: // confirm.select
			w.method(ch, 85, 11, nil)
		case class == 50 && id == 10: // queue.declare
			name := readShortstr(args[2:])
			if name == f.opts.ignoreDeclare {
				continue
			}
			w.method(ch, 50, 11, append(shortstr(nil, name), 0, 0, 0, 0, 0, 0, 0, 0))
		case class == 50 && id == 20: // queue.bind
			w.method(ch, 50, 21, nil)
		case class == 60 && id == 10: // basic.qos
			w.method(ch, 60, 11, nil)
		case class == 60 && id == 20: // basic.consume
			queue := readShortstr(args[2:])
			ctag := readShortstr(args[3+len(queue):])
			w.method(ch, 60, 21, shortstr(nil, ctag))
			f.mu.Lock()
			f.consumers = append(f.consumers, fakeConsumer{w: w, ch: ch, ctag: ctag})
			f.mu.Unlock()
		case class == 60 && id == 80: // basic.ack from a consumer
			f.mu.Lock()
			f.acks++
			f.mu.Unlock()
		case class == 60 && id == 40: // basic.publish
			rest := args[2:]
			ex := readShortstr(rest)
			rest = rest[1+len(ex):]
			key := readShortstr(rest)
			rest = rest[1+len(key):]
			cur, curCh = &fakePublish{exchange: ex, key: key, mandatory: len(rest) > 0 && rest[0]&1 != 0}, ch
		default:
			return // nothing else is expected of the publisher
		}
	}
}

func (f *fakeBroker) published(w *fakeConn, ch uint16, tags map[uint16]uint64, p *fakePublish) {
	tags[ch]++
	f.mu.Lock()
	f.got = append(f.got, *p)
	f.mu.Unlock()
	f.onPublish(w, ch, tags[ch], *p)
}

func readShortstr(b []byte) string {
	if len(b) == 0 || int(b[0]) > len(b)-1 {
		return ""
	}
	return string(b[1 : 1+b[0]])
}

// messageID reads the message-id property of a content header's property list.
func messageID(b []byte) string {
	flags := binary.BigEndian.Uint16(b)
	b = b[2:]
	for bitN := 15; bitN >= 7; bitN-- {
		if flags&(1<<bitN) == 0 {
			continue
		}
		switch bitN {
		case 13: // headers: a table
			n := binary.BigEndian.Uint32(b)
			b = b[4+n:]
		case 12, 11: // delivery-mode, priority
			b = b[1:]
		case 7:
			return readShortstr(b)
		default:
			b = b[1+int(b[0]):]
		}
	}
	return ""
}

// acker acks every publish.
func acker(w *fakeConn, ch uint16, tag uint64, _ fakePublish) { w.ack(ch, tag, false) }
