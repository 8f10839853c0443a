package nsq_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// startFake starts an nsqd that misbehaves as m: it speaks the producer side of the NSQ TCP protocol
// (magic, IDENTIFY announcing max_msg_size so no size probe is needed, PUB, MPUB, NOP). NSQ answers in
// order, without ids, so its guessed answers are extra OKs; Flood and AheadOfHandshake send them from the
// handshake on. Stored messages are those of every PUB and MPUB read whole (Garbage and Flood store none).
func startFake(t testing.TB, m publishertest.Misbehaviour) publishertest.Fake {
	f := &fakeNSQD{publishertest.FakeOne{M: m}}
	f.S = publishertest.StartFakeServer(t, f.serve)
	return f
}

type fakeNSQD struct{ publishertest.FakeOne }

func nsqFrame(typ uint32, data string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(data)))
	b = binary.BigEndian.AppendUint32(b, typ)
	return append(b, data...)
}

var nsqOK = nsqFrame(0, "OK")

func (f *fakeNSQD) serve(c *publishertest.FakeConn) {
	r := bufio.NewReader(c)
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return
	}
	a := publishertest.Answerer{M: f.M}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		var bodies [][]byte
		switch cmd {
		case "NOP":
			continue
		case "IDENTIFY":
			if _, err := readNSQBody(r); err != nil {
				return
			}
			if c.Send(nsqFrame(0, `{"max_msg_size":1048576,"version":"1.3.0-fake"}`)) != nil {
				return
			}
			switch f.M {
			case publishertest.CloseAfterHandshake:
				return
			case publishertest.AheadOfHandshake:
				if c.Send(append(append([]byte{}, nsqOK...), nsqOK...)) != nil {
					return
				}
			case publishertest.Flood:
				c.Flood(func(int) []byte { return nsqOK })
			}
			continue
		case "PUB":
			body, err := readNSQBody(r)
			if err != nil {
				return
			}
			bodies = [][]byte{body}
		case "MPUB":
			if bodies, err = readNSQMPUB(r); err != nil {
				return
			}
		default:
			_ = c.Send(nsqFrame(1, "E_INVALID fake nsqd: "+cmd))
			return
		}
		// NSQ's guess for any later command is one more OK.
		answer := a.Answer(func() { f.S.Store(bodies...) }, nsqOK, func(int) []byte { return nsqOK }, nsqFrame(0, "GARBAGE-NOT-OK"))
		if answer != nil && c.Send(answer) != nil {
			return
		}
	}
}

func readNSQBody(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 2<<20 {
		return nil, io.ErrUnexpectedEOF
	}
	body := make([]byte, n)
	_, err := io.ReadFull(r, body)
	return body, err
}

func readNSQMPUB(r *bufio.Reader) ([][]byte, error) {
	all, err := readNSQBody(r)
	if err != nil {
		return nil, err
	}
	if len(all) < 4 {
		return nil, io.ErrUnexpectedEOF
	}
	n := binary.BigEndian.Uint32(all)
	all = all[4:]
	var out [][]byte
	for range n {
		if len(all) < 4 {
			return nil, io.ErrUnexpectedEOF
		}
		l := binary.BigEndian.Uint32(all)
		if uint32(len(all)-4) < l {
			return nil, io.ErrUnexpectedEOF
		}
		out = append(out, all[4:4+l])
		all = all[4+l:]
	}
	return out, nil
}
