package amqp

import (
	"encoding/binary"
	"sync/atomic"
)

// confirmGuard checks every basic.ack and basic.nack the broker sends a publishing connection before
// the client library reads it, as the library trusts their delivery tags: for a multiple confirm its
// reader hands over every tag up to the one named, holding its confirms lock (2^40 of them take hours
// of CPU, and the connection's shutdown, so Close, waits for them), and a single confirm it cannot
// put in sequence stays in its memory for good. A confirm for a tag beyond those the writer numbered
// (never published), or a single one for a tag confirmed already, is a protocol violation: the
// connection dies and the library never sees the frame.
type confirmGuard struct {
	numbered  atomic.Uint64        // the last delivery tag the writer numbered (link.next)
	confirmed atomic.Uint64        // the last tag the listener took a confirm for (link.confirmed)
	link      atomic.Pointer[link] // told of a violation; nil while the connection is set up
}

// check looks at the start of a method frame's payload (class, method, delivery tag, bits); a
// non-nil error is a violation.
func (g *confirmGuard) check(head []byte) error {
	if len(head) < confirmHead {
		return nil // no confirm (one this short the library refuses)
	}
	class, method := binary.BigEndian.Uint16(head), binary.BigEndian.Uint16(head[2:])
	if class != 60 || (method != 80 && method != 120) { // basic.ack, basic.nack
		return nil
	}
	what := "basic.ack"
	if method == 120 {
		what = "basic.nack"
	}
	tag, multiple := binary.BigEndian.Uint64(head[4:]), head[12]&1 != 0
	// A tag the writer numbered may not have reached the library yet: the listener checks those.
	if n := g.numbered.Load(); tag > n {
		return protocolError("%s of delivery tag %d (multiple: %v), with %d published", what, tag, multiple, n)
	}
	// The listener took tag's confirm, so the library dispatched one for it before this frame.
	if c := g.confirmed.Load(); !multiple && tag <= c {
		return protocolError("%s of delivery tag %d, confirmed already (up to %d)", what, tag, c)
	}
	return nil
}

// fail ends the link for err, once it exists (a violation while it is set up fails the set-up).
func (g *confirmGuard) fail(err error) {
	if l := g.link.Load(); l != nil {
		l.violation(err)
	}
}

// confirmHead is the part of a confirm's payload the guard reads: class and method ids, delivery tag,
// bits.
const confirmHead = 2 + 2 + 8 + 1

// frameScan follows the frames in the bytes the broker sends, as the library reads them (type,
// channel, payload size, payload, frame end), and collects the start of each method frame's payload.
// It keeps a few bytes whatever the frames' sizes.
type frameScan struct {
	hdr   [7]byte
	nhdr  int    // bytes of hdr read
	size  uint64 // the current frame's payload size
	left  uint64 // bytes of the current frame still to come after its header (payload, frame end)
	head  [confirmHead]byte
	nhead int
}

// feed scans b, calls check with the head of each method frame once it has it, and returns the
// first error check returned.
func (s *frameScan) feed(b []byte, check func(head []byte) error) error {
	for len(b) > 0 {
		if s.nhdr < len(s.hdr) {
			k := copy(s.hdr[s.nhdr:], b)
			s.nhdr += k
			b = b[k:]
			if s.nhdr == len(s.hdr) {
				s.size = uint64(binary.BigEndian.Uint32(s.hdr[3:]))
				s.left, s.nhead = s.size+1, 0
			}
			continue
		}
		k := min(uint64(len(b)), s.left)
		want := min(uint64(len(s.head)), s.size) // the head this frame has
		if s.hdr[0] == 1 && uint64(s.nhead) < want {
			n := copy(s.head[s.nhead:want], b[:k])
			s.nhead += n
			if uint64(s.nhead) == want {
				if err := check(s.head[:s.nhead]); err != nil {
					return err
				}
			}
		}
		s.left -= k
		b = b[k:]
		if s.left == 0 {
			s.nhdr = 0
		}
	}
	return nil
}
