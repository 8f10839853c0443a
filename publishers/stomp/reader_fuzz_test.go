package stomp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// The readers of broker answers face whatever a broker (or something posing as one) sends: they must
// never panic, never allocate more than their limits whatever a size field says, and end with an error
// of a known kind: the input's end (io.EOF between frames, io.ErrUnexpectedEOF inside one) or a
// malformed frame (errNSQFrame, errSTOMPFrame). Seeds: testdata/fuzz/<target>.

// readerBuf is the size of the connection core's read buffer.
const readerBuf = 16 << 10

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
			case a.Kind == wire.ByID && a.Err != nil && (!errors.Is(a.Err, publishers.ErrRejected) || a.Close == nil):
				t.Fatalf("ERROR naming a receipt: %v, closing with %v", a.Err, a.Close)
			case a.Kind == wire.None && a.Close != nil && !errors.Is(a.Close, publishers.ErrRejected):
				t.Fatalf("ERROR naming no receipt closes with %v, want publishers.ErrRejected", a.Close)
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

// A size field from the broker never decides how much we allocate: frames claiming gigabytes are
// refused as malformed after reading only their header.
func TestReadersBoundAllocation(t *testing.T) {
	stomp := func(in []byte) error {
		_, err := readSTOMPFrame(bufio.NewReaderSize(bytes.NewReader(in), readerBuf))
		return err
	}
	publishertest.RunBoundedReads(t, errSTOMPFrame, []publishertest.BoundedRead{
		{Name: "STOMP content-length of 4 GiB", Input: []byte("ERROR\ncontent-length:4294967295\n\n"), Read: stomp},
		{Name: "STOMP header line without end", Input: append([]byte("RECEIPT\nreceipt-id:"), make([]byte, 8<<20)...), Read: stomp},
	})
}
