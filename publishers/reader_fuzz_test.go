package publishers

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strconv"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"
	"github.com/nsqio/go-nsq"

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
			case a.Close != nil && (!errors.Is(a.Err, ErrRejected) || !errors.Is(a.Close, ErrUnavailable)):
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

func FuzzReadSTOMPAnswer(f *testing.F) {
	rc := newSTOMPReceipts()
	f.Add([]byte("RECEIPT\nreceipt-id:" + string(rc.appendID(nil, 1)) + "\n\n\x00\n"))
	f.Add([]byte("RECEIPT\nreceipt-id:1\n\n\x00\n"))
	f.Add([]byte("\n\r\nRECEIPT\r\nreceipt-id:" + string(rc.appendID(nil, 77)) + "\r\n\r\n\x00"))
	f.Add([]byte("ERROR\nmessage:AMQ229216 Invalid queue name \ncontent-type:text/plain\nreceipt-id:" + string(rc.appendID(nil, 3)) + "\ncontent-length:31\n\nAMQ229216: Invalid queue name: \x00\n"))
	f.Add([]byte("ERROR\nmessage:bad\n\nno receipt named\x00"))
	f.Add([]byte("CONNECTED\nversion:1.2\nserver:Foo\\Bar\nheart-beat:0,30000\n\n\x00"))
	f.Add([]byte("RECEIPT\nreceipt-id:a\\cb\n\n\x00"))
	f.Add([]byte("RECEIPT\nreceipt-id:bad\\x\n\n\x00"))
	f.Add([]byte("ERROR\ncontent-length:4294967295\n\n"))
	f.Add([]byte("MESSAGE\ndestination:/queue/x\n\nbody\x00"))
	f.Add([]byte("BOGUS\n\n\x00"))
	f.Add(append([]byte("RECEIPT\nreceipt-id:"), bytes.Repeat([]byte("9"), readerBuf)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), readerBuf)
		for range len(data) + 1 { // every answer consumes at least a byte
			a, err := readSTOMPAnswer(r, rc)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, wire.ErrProtocol) {
					t.Fatalf("error of no known kind: %v", err)
				}
				return
			}
			switch {
			case a.Kind == wire.Next:
				t.Fatal("STOMP answers by receipt id, never in order")
			case a.Kind == wire.ByID && a.Err != nil && (!errors.Is(a.Err, ErrRejected) || a.Close == nil):
				t.Fatalf("ERROR naming a receipt: %v, closing with %v", a.Err, a.Close)
			case a.Kind == wire.None && a.Close != nil && !errors.Is(a.Close, ErrRejected):
				t.Fatalf("ERROR naming no receipt closes with %v, want ErrRejected", a.Close)
			}
		}
		t.Fatal("reader returned answers without consuming input")
	})
}

// What we encode is what the protocols' own code reads back: SEND decoded by go-stomp's frame.Reader
// (the destination, escaped when it needs to be, included), PUB and MPUB byte-identical to go-nsq's
// commands and parsed back as nsqd does (command line split at spaces, then sizes).
func FuzzEncodeSTOMP(f *testing.F) {
	f.Add("/queue/", "orders", []byte("hello"), true, uint64(0), uint64(1))
	f.Add("/topic/", "conformance::", []byte{}, false, uint64(7), uint64(0))
	f.Add("/queue/", "a\\b\nreceipt:9\r", []byte("x\x00y"), true, uint64(1), uint64(2))
	rc := newSTOMPReceipts()
	f.Fuzz(func(t *testing.T, prefix, topic string, body []byte, persistent bool, tx, receipt uint64) {
		dest := prefix + topic
		enc := appendSEND(nil, dest, body, persistent, tx, rc, receipt)
		got, err := frame.NewReader(bytes.NewReader(enc)).Read()
		if err != nil {
			t.Fatalf("go-stomp cannot read our SEND %q: %v", enc, err)
		}
		want := map[string]string{frame.Destination: dest, frame.ContentLength: strconv.Itoa(len(body))}
		if persistent {
			want["persistent"] = "true"
		}
		if tx != 0 {
			want[frame.Transaction] = "tx-" + strconv.FormatUint(tx, 10)
		}
		if receipt != 0 {
			want[frame.Receipt] = string(rc.appendID(nil, receipt))
		}
		if got.Command != frame.SEND || got.Header.Len() != len(want) || !bytes.Equal(got.Body, body) {
			t.Fatalf("SEND %q read back as %s with %d headers, body %q", enc, got.Command, got.Header.Len(), got.Body)
		}
		for k, v := range want {
			if g, ok := got.Header.Contains(k); !ok || g != v {
				t.Fatalf("SEND %q: header %s read back as %q, want %q", enc, k, g, v)
			}
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
	stomp := func(in []byte) error {
		_, err := readSTOMPFrame(bufio.NewReaderSize(bytes.NewReader(in), readerBuf))
		return err
	}
	cases := []struct {
		name  string
		input []byte
		read  func([]byte) error
	}{
		{"NSQ answer of 4 GiB", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, nsqAnswer},
		{"NSQ handshake frame of 2 GiB", []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0}, nsqHandshake},
		{"STOMP content-length of 4 GiB", []byte("ERROR\ncontent-length:4294967295\n\n"), stomp},
		{"STOMP header line without end", append([]byte("RECEIPT\nreceipt-id:"), make([]byte, 8<<20)...), stomp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := tc.read(tc.input)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, errNSQFrame) && !errors.Is(err, errSTOMPFrame) {
				t.Errorf("got %v, want a malformed-frame error", err)
			}
			// The read buffer is 16 KiB; the margin is for what other goroutines allocate meanwhile.
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("allocated %d bytes", n)
			}
		})
	}
}
