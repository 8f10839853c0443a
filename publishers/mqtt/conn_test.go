package mqtt

import (
	"bytes"
	"errors"
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
			c := &netConn{Conn: under}
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
		c := &netConn{Conn: under, serial: true}
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
