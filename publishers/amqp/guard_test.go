package amqp

import (
	"encoding/binary"
	"errors"
	"testing"
)

// frameBytes is one frame as a broker writes it.
func frameBytes(typ byte, ch uint16, payload []byte) []byte {
	b := binary.BigEndian.AppendUint16([]byte{typ}, ch)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(append(b, payload...), 0xCE)
}

// confirmBytes is a basic.ack (or nack) method frame.
func confirmBytes(method uint16, tag uint64, multiple bool) []byte {
	p := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 60), method)
	p = append(binary.BigEndian.AppendUint64(p, tag), bit(multiple))
	return frameBytes(1, 1, p)
}

// TestConfirmGuard: the guard finds every confirm in the broker's byte stream however reads split
// it, never takes a body's bytes for one, and refuses exactly the tags not numbered or (single)
// confirmed already.
func TestConfirmGuard(t *testing.T) {
	body := confirmBytes(80, 1<<40, true) // content that looks like a confirm
	stream := func(frames ...[]byte) []byte {
		var b []byte
		for _, f := range frames {
			b = append(b, f...)
		}
		return b
	}
	for _, tc := range []struct {
		name                string
		numbered, confirmed uint64
		bytes               []byte
		violation           bool
	}{
		{name: "acks in range", numbered: 5, confirmed: 1, bytes: stream(confirmBytes(80, 2, false), confirmBytes(80, 5, true))},
		{name: "multiple ack up to a tag confirmed already", numbered: 5, confirmed: 3, bytes: confirmBytes(80, 3, true)},
		{name: "ack beyond the numbered", numbered: 5, bytes: confirmBytes(80, 6, false), violation: true},
		{name: "multiple nack beyond the numbered", numbered: 5, bytes: confirmBytes(120, 1<<40, true), violation: true},
		{name: "single ack confirmed already", numbered: 5, confirmed: 3, bytes: confirmBytes(80, 3, false), violation: true},
		{name: "single ack of tag 0", numbered: 5, bytes: confirmBytes(80, 0, false), violation: true},
		{name: "after a heartbeat, a header and a body", numbered: 1,
			bytes:     stream(frameBytes(8, 0, nil), frameBytes(2, 1, make([]byte, 14)), frameBytes(3, 1, body), confirmBytes(80, 2, false)),
			violation: true},
		{name: "a body that looks like a bad ack", numbered: 1, bytes: stream(frameBytes(3, 1, body), frameBytes(3, 1, body[:5]), confirmBytes(80, 1, false))},
		{name: "a short method frame", numbered: 1, bytes: stream(frameBytes(1, 0, []byte{0, 10, 0, 51}), confirmBytes(80, 1, false))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1, 3, 7, len(tc.bytes)} { // how reads split the stream
				g := &confirmGuard{}
				g.numbered.Store(tc.numbered)
				g.confirmed.Store(tc.confirmed)
				var s frameScan
				var err error
				for b := tc.bytes; len(b) > 0 && err == nil; b = b[min(chunk, len(b)):] {
					err = s.feed(b[:min(chunk, len(b))], g.check)
				}
				if (err != nil) != tc.violation || (err != nil && !errors.Is(err, errProtocol)) {
					t.Fatalf("reads of %d bytes: %v, want a violation: %v", chunk, err, tc.violation)
				}
			}
		})
	}
}
