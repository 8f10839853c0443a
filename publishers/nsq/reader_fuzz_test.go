package nsq

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/nsqio/go-nsq"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// The readers of broker answers face whatever a broker (or something posing as one) sends: they must
// never panic, never allocate more than their limits whatever a size field says, and end with an error
// of a known kind: the input's end (io.EOF between frames, io.ErrUnexpectedEOF inside one) or a
// malformed frame (errNSQFrame, errSTOMPFrame). Seeds: testdata/fuzz/<target>.

// nsqFrame builds a frame as nsqd sends it.
func nsqFrame(frameType int32, data string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(data)))
	b = binary.BigEndian.AppendUint32(b, uint32(frameType))
	return append(b, data...)
}

// readerBuf is the size of the connection core's read buffer.
const readerBuf = 16 << 10

func FuzzReadNSQAnswer(f *testing.F) {
	f.Add(nsqFrame(nsq.FrameTypeResponse, "OK"))
	f.Add(append(nsqFrame(nsq.FrameTypeResponse, "_heartbeat_"), nsqFrame(nsq.FrameTypeResponse, "OK")...))
	f.Add(nsqFrame(nsq.FrameTypeError, "E_BAD_TOPIC PUB topic name \"bad!topic\" is not valid"))
	f.Add(nsqFrame(nsq.FrameTypeMessage, "not for a producer"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}) // a 4 GiB size
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 0})             // smaller than the type field
	f.Add(nsqFrame(nsq.FrameTypeResponse, "OK")[:9])  // cut inside the data
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), readerBuf)
		for range len(data) + 1 { // every answer consumes at least 8 bytes
			a, err := readNSQAnswer(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errNSQFrame) {
					t.Fatalf("error of no known kind: %v", err)
				}
				return
			}
			switch {
			case a.Kind != wire.None && a.Kind != wire.Next:
				t.Fatalf("answer kind %d: NSQ answers in order", a.Kind)
			case a.Close != nil && (!errors.Is(a.Err, publishers.ErrRejected) || !errors.Is(a.Close, publishers.ErrUnavailable)):
				t.Fatalf("error frame classified as %v, closing with %v", a.Err, a.Close)
			case a.Reply != nil && !bytes.Equal(a.Reply, nop):
				t.Fatalf("reply %q, want NOP", a.Reply)
			}
		}
		t.Fatal("reader returned answers without consuming input")
	})
}

// The handshake's reader (IDENTIFY answer, size probe) reads from the connection unbuffered.
func FuzzReadNSQFrame(f *testing.F) {
	f.Add(nsqFrame(nsq.FrameTypeResponse, `{"max_rdy_count":2500,"version":"1.3.0","max_msg_size":1048576}`))
	f.Add(nsqFrame(nsq.FrameTypeError, "E_BAD_MESSAGE PUB message too big 2147483647 > 1048576"))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		_, got, err := readNSQFrame(r)
		switch {
		case err == nil && len(got) > nsqMaxAnswer:
			t.Fatalf("%d bytes of data, more than the limit %d", len(got), nsqMaxAnswer)
		case err == nil && int(r.Size())-r.Len() != 8+len(got):
			t.Fatalf("read %d bytes for a frame of %d", int(r.Size())-r.Len(), 8+len(got))
		case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errNSQFrame):
			t.Fatalf("error of no known kind: %v", err)
		}
	})
}

func FuzzEncodeNSQ(f *testing.F) {
	f.Add("t", []byte("hello"), []byte("b"), 2)
	f.Add("bench-7#ephemeral", []byte{}, []byte("\x00\x00\x00\x01"), 1)
	f.Fuzz(func(t *testing.T, topic string, body, other []byte, n int) {
		if checkNSQTopicFraming(0, topic) != nil {
			t.Skip("refused before encoding")
		}
		bodies := [][]byte{body}
		for range max(0, min(n, 8)) {
			bodies = append(bodies, other)
		}
		pub := appendPUB(nil, topic, body)
		if want := encodeGoNSQ(t, nsq.Publish(topic, body)); !bytes.Equal(pub, want) {
			t.Fatalf("PUB differs from go-nsq's: %q, want %q", pub, want)
		}
		if cmd, gotTopic, got := parseNSQD(t, pub); cmd != "PUB" || gotTopic != topic || len(got) != 1 || !bytes.Equal(got[0], body) {
			t.Fatalf("PUB read back as %s to %q of %d bodies", cmd, gotTopic, len(got))
		}
		mpub := appendMPUB(nil, topic, bodies)
		cmd, err := nsq.MultiPublish(topic, bodies)
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeGoNSQ(t, cmd); !bytes.Equal(mpub, want) {
			t.Fatalf("MPUB differs from go-nsq's")
		}
		name, gotTopic, got := parseNSQD(t, mpub)
		if name != "MPUB" || gotTopic != topic || len(got) != len(bodies) {
			t.Fatalf("MPUB read back as %s to %q of %d bodies, want %d", name, gotTopic, len(got), len(bodies))
		}
		for i := range bodies {
			if !bytes.Equal(got[i], bodies[i]) {
				t.Fatalf("MPUB body %d read back as %q, want %q", i, got[i], bodies[i])
			}
		}
	})
}

func encodeGoNSQ(t *testing.T, cmd *nsq.Command) []byte {
	var buf bytes.Buffer
	if _, err := cmd.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// parseNSQD reads a PUB or MPUB as nsqd v1.3.0's protocolV2 does: the line up to '\n' (a CR before it
// dropped) split at spaces, the topic the second field, then a 4-byte size and the body (MPUB: a
// count, then size and body per message). It checks the topic arrives whole and nothing is left over.
func parseNSQD(t *testing.T, b []byte) (cmd, topic string, bodies [][]byte) {
	t.Helper()
	line, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		t.Fatalf("no command line in %q", b)
	}
	line = bytes.TrimSuffix(line, []byte{'\r'})
	params := bytes.Split(line, []byte{' '})
	if len(params) != 2 {
		t.Fatalf("command line %q has %d fields, want 2", line, len(params))
	}
	next := func() []byte {
		if len(rest) < 4 {
			t.Fatalf("size cut short in %q", b)
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(len(rest)-4) < uint64(n) {
			t.Fatalf("size %d, %d bytes left", n, len(rest)-4)
		}
		v := rest[4 : 4+n]
		rest = rest[4+n:]
		return v
	}
	switch string(params[0]) {
	case "PUB":
		bodies = append(bodies, next())
	case "MPUB":
		all := next()
		outer := rest
		rest = all
		if len(rest) < 4 {
			t.Fatalf("MPUB without count")
		}
		count := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		for range count {
			bodies = append(bodies, next())
		}
		if len(rest) != 0 {
			t.Fatalf("MPUB: %d bytes after the last message", len(rest))
		}
		rest = outer
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the command", len(rest))
	}
	return string(params[0]), string(params[1]), bodies
}

// A size field from the broker never decides how much we allocate: frames claiming gigabytes are
// refused as malformed after reading only their header.
func TestReadersBoundAllocation(t *testing.T) {
	nsqAnswer := func(in []byte) error {
		_, err := readNSQAnswer(bufio.NewReaderSize(bytes.NewReader(in), readerBuf))
		return err
	}
	nsqHandshake := func(in []byte) error {
		_, _, err := readNSQFrame(bytes.NewReader(in))
		return err
	}
	publishertest.RunBoundedReads(t, errNSQFrame, []publishertest.BoundedRead{
		{Name: "NSQ answer of 4 GiB", Input: []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, Read: nsqAnswer},
		{Name: "NSQ handshake frame of 2 GiB", Input: []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0}, Read: nsqHandshake},
	})
}
