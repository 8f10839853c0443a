package mqtt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// MQTT control packet types this file looks at.
const (
	typePublish   = 3
	typePuback    = 4
	typePubrec    = 5
	typePubrel    = 6
	typePubcomp   = 7
	typeSubscribe = 8
	typeSuback    = 9
)

// errProtocol marks a broker answering what was never asked: the connection is closed and what was
// pending on it fails as unavailable.
var errProtocol = errors.New("protocol violation")

// scanner splits a byte stream into MQTT packets and hands each one's type, flags and the first bytes
// of its body (as many as head asks for) to onPacket, without keeping more than that.
type scanner struct {
	max      int    // the largest remaining length taken; 0: the protocol's
	hdr      []byte // the fixed header so far (type byte and remaining length)
	inBody   bool
	typ      byte
	flags    byte
	left     int    // body bytes still to come
	head     []byte // body bytes kept
	reported bool
}

// headLen is how many body bytes of a packet the tap needs: the packet identifier of acknowledgements
// and SUBSCRIBE, and of a PUBLISH its topic and (QoS 1 and 2) identifier.
func headLen(typ, flags byte, head []byte) int {
	switch typ {
	case typePuback, typePubrec, typePubrel, typePubcomp, typeSubscribe, typeSuback:
		return 2
	case typePublish:
		if flags>>1&3 == 0 || len(head) < 2 {
			return 2
		}
		return 2 + int(binary.BigEndian.Uint16(head)) + 2
	}
	return 0
}

func (s *scanner) feed(b []byte, onPacket func(typ, flags byte, head []byte) error) error {
	for len(b) > 0 {
		if !s.inBody {
			s.hdr = append(s.hdr, b[0])
			b = b[1:]
			if len(s.hdr) == 1 {
				continue
			}
			n, mult, done := 0, 1, false
			for _, c := range s.hdr[1:] {
				n += int(c&0x7f) * mult
				mult *= 128
				if c&0x80 == 0 {
					done = true
					break
				}
			}
			if !done {
				if len(s.hdr) == 5 {
					return fmt.Errorf("%w: malformed remaining length", errProtocol)
				}
				continue
			}
			if s.max > 0 && n > s.max {
				return fmt.Errorf("%w: a packet of type %d announces %d bytes, more than the %d a publishing connection is sent", errProtocol, s.hdr[0]>>4, n, s.max)
			}
			s.typ, s.flags, s.left, s.head, s.reported, s.inBody = s.hdr[0]>>4, s.hdr[0]&0x0f, n, s.head[:0], false, true
			s.hdr = s.hdr[:0]
		}
		for !s.reported && s.left > 0 && len(b) > 0 && len(s.head) < headLen(s.typ, s.flags, s.head) {
			s.head = append(s.head, b[0])
			b, s.left = b[1:], s.left-1
		}
		if !s.reported && (s.left == 0 || len(s.head) >= headLen(s.typ, s.flags, s.head)) {
			s.reported = true
			if err := onPacket(s.typ, s.flags, s.head); err != nil {
				return err
			}
		}
		skip := min(s.left, len(b))
		b, s.left = b[skip:], s.left-skip
		if s.left == 0 && s.reported {
			s.inBody = false
		}
	}
	return nil
}

// ackTap checks every acknowledgement a broker sends against what this connection sent: a PUBACK,
// PUBREC, PUBCOMP or SUBACK must answer a packet identifier outstanding at the right stage. paho ignores
// one it does not know and would take one for an identifier it allocated but not yet written (a
// broker answering ahead); the tap fails the connection before paho reads either.
type ackTap struct {
	mu       sync.Mutex
	out, in  scanner
	pending  map[uint16]byte // identifier -> the answer expected: PUBACK, PUBREC, PUBCOMP or SUBACK
	violated func(error)     // counts and logs
}

// maxInbound bounds what a broker may send a publishing connection in one packet: acknowledgements,
// SUBACK and the $SYS version are a few bytes, and paho allocates the announced length before reading
// it (up to 256 MiB a packet).
const maxInbound = 64 << 10

func newAckTap(violated func(error)) *ackTap {
	return &ackTap{pending: map[uint16]byte{}, violated: violated, in: scanner{max: maxInbound}}
}

func id(head []byte) (uint16, bool) {
	if len(head) < 2 {
		return 0, false
	}
	return binary.BigEndian.Uint16(head[len(head)-2:]), true
}

// wrote records what the client writes, before it goes out: an answer can then never arrive first.
func (t *ackTap) wrote(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.out.feed(b, func(typ, flags byte, head []byte) error {
		switch typ {
		case typePublish:
			if q := flags >> 1 & 3; q > 0 {
				if i, ok := id(head); ok {
					t.pending[i] = map[byte]byte{1: typePuback, 2: typePubrec}[q]
				}
			}
		case typePubrel:
			if i, ok := id(head); ok {
				t.pending[i] = typePubcomp
			}
		case typeSubscribe:
			if i, ok := id(head); ok {
				t.pending[i] = typeSuback
			}
		}
		return nil
	})
}

// read checks what the broker sent; an error means the connection must end before paho sees b.
func (t *ackTap) read(b []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.in.feed(b, func(typ, _ byte, head []byte) error {
		switch typ {
		case typePuback, typePubrec, typePubcomp, typeSuback:
		default:
			return nil
		}
		i, ok := id(head)
		if !ok {
			return fmt.Errorf("%w: %s without a packet identifier", errProtocol, packetName(typ))
		}
		want, found := t.pending[i]
		if !found || want != typ {
			return fmt.Errorf("%w: %s for packet identifier %d, which has no %s outstanding", errProtocol, packetName(typ), i, packetName(typ))
		}
		if typ == typePubrec {
			t.pending[i] = 0 // the PUBREL is due; a PUBCOMP before it answers nothing
		} else {
			delete(t.pending, i)
		}
		return nil
	})
	if err != nil {
		t.violated(err)
	}
	return err
}

func packetName(typ byte) string {
	switch typ {
	case typePuback:
		return "PUBACK"
	case typePubrec:
		return "PUBREC"
	case typePubcomp:
		return "PUBCOMP"
	case typeSuback:
		return "SUBACK"
	}
	return fmt.Sprintf("packet type %d", typ)
}
