package mqtt

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
)

// countingConn records every Write made to it; failWrites makes them fail.
type countingConn struct {
	net.Conn // nil: only Write, Close and SetWriteDeadline are called
	writes   [][]byte
	fail     bool
	closed   bool
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), b...))
	if c.fail {
		return 0, errors.New("broken pipe")
	}
	return len(b), nil
}
func (c *countingConn) Close() error                     { c.closed = true; return nil }
func (c *countingConn) SetWriteDeadline(time.Time) error { return nil }

// TestNetConnOneWritePerPacket: paho writes a packet's parts as net.Buffers, one Write each to a
// wrapper; netConn gathers them while paho holds its lock and writes the packet in one Write, byte for
// byte what paho would have written. A failed gathered write closes the connection; a buffer grown by
// a large message is not kept.
func TestNetConnOneWritePerPacket(t *testing.T) {
	publish := func(payload []byte) *packets.ControlPacket {
		cp := packets.NewControlPacket(packets.PUBLISH)
		cp.Content = &packets.Publish{Topic: "a/topic", QoS: 1, PacketID: 7, Payload: payload, Properties: &packets.Properties{}}
		return cp
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		fail    bool
	}{
		{"small", bytes.Repeat([]byte{'x'}, 100), false},
		{"large", bytes.Repeat([]byte{'y'}, 1<<20), false},
		{"write fails", []byte("z"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			if _, err := publish(tc.payload).WriteTo(&want); err != nil {
				t.Fatal(err)
			}
			under := &countingConn{fail: tc.fail}
			c := newNetConn(under, nil)
			if _, err := publish(tc.payload).WriteTo(c); err != nil {
				t.Fatalf("WriteTo: %v", err)
			}
			if len(under.writes) != 1 || !bytes.Equal(under.writes[0], want.Bytes()) {
				t.Fatalf("%d writes to the connection, want 1 of the packet's %d bytes", len(under.writes), want.Len())
			}
			if under.closed != tc.fail {
				t.Errorf("connection closed: %v, want %v", under.closed, tc.fail)
			}
			if cap(c.pending) > maxKeptPending {
				t.Errorf("kept a %d-byte gathering buffer", cap(c.pending))
			}
		})
	}
	t.Run("serial writes at once", func(t *testing.T) {
		under := &countingConn{}
		c := newNetConn(under, nil)
		c.serial = true
		for _, b := range []string{"one", "two"} {
			if _, err := c.Write([]byte(b)); err != nil {
				t.Fatal(err)
			}
		}
		if len(under.writes) != 2 {
			t.Fatalf("%d writes, want 2 (one per Write)", len(under.writes))
		}
	})
}

// readConn hands out what the broker sent, all of it to one read as the kernel would.
type readConn struct {
	net.Conn // nil: only Read and Close are called
	in       []byte
	reads    int
	closed   bool
}

func (c *readConn) Read(b []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	c.reads++
	n := copy(b, c.in)
	c.in = c.in[n:]
	return n, nil
}
func (c *readConn) Close() error { c.closed = true; return nil }

// TestNetConnTapsWholeReads: paho reads a packet in pieces (1 byte, then its length, then the rest).
// When the honest PUBACK for 1 and one ahead for 2 (not written yet) arrive together, paho must see
// neither: read piecewise, the tap would pass the first, paho would complete its publish, the next one
// would write identifier 2, and the answer ahead would then be taken as its acknowledgement.
func TestNetConnTapsWholeReads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []*packets.ControlPacket
		bad     bool
	}{
		{"honest", []*packets.ControlPacket{ack(packets.PUBACK, 1)}, false},
		{"answer ahead arrives with it", []*packets.ControlPacket{ack(packets.PUBACK, 1), ack(packets.PUBACK, 2)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := encode(t, tc.answers...)
			under := &readConn{in: bytes.Clone(sent)}
			var violations int
			c := newNetConn(under, newAckTap(func(error) { violations++ }))
			c.tap.wrote(encode(t, publish(1, 1, "t", []byte("m"))))
			var got []byte
			var err error
			for err == nil && len(got) < len(sent) {
				b := make([]byte, 1) // paho's first read of a packet: its type byte
				var n int
				n, err = c.Read(b)
				got = append(got, b[:n]...)
			}
			if tc.bad {
				if !errors.Is(err, errProtocol) || len(got) != 0 || !under.closed || violations != 1 {
					t.Fatalf("paho got %d bytes, then %v (closed %v, %d violations); want a protocol error before any byte", len(got), err, under.closed, violations)
				}
				return
			}
			if err != nil || !bytes.Equal(got, sent) || under.reads != 1 {
				t.Fatalf("paho got % x, %v in %d reads of the connection; want the PUBACK in 1", got, err, under.reads)
			}
		})
	}
}
