package mqtt

import (
	"bytes"
	"errors"
	"testing"

	"github.com/eclipse/paho.golang/packets"
)

// encode writes packets as paho puts them on the wire.
func encode(t *testing.T, ps ...*packets.ControlPacket) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, p := range ps {
		if _, err := p.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func publish(id uint16, qos byte, topic string, payload []byte) *packets.ControlPacket {
	return (&packets.Publish{PacketID: id, QoS: qos, Topic: topic, Payload: payload, Properties: &packets.Properties{}}).ToControlPacket()
}

func ack(typ byte, id uint16) *packets.ControlPacket {
	cp := packets.NewControlPacket(typ)
	switch c := cp.Content.(type) {
	case *packets.Puback:
		c.PacketID = id
	case *packets.Pubrec:
		c.PacketID = id
	case *packets.Pubrel:
		c.PacketID = id
	case *packets.Pubcomp:
		c.PacketID = id
	case *packets.Suback:
		c.PacketID, c.Reasons = id, []byte{0}
	}
	return cp
}

func subscribe(id uint16) *packets.ControlPacket {
	cp := packets.NewControlPacket(packets.SUBSCRIBE)
	s := cp.Content.(*packets.Subscribe)
	s.PacketID, s.Subscriptions = id, []packets.SubOptions{{Topic: "x"}}
	return cp
}

// step is bytes the client writes or reads.
type step struct {
	write bool
	b     []byte
}

// TestAckTap: the tap takes every answer to something written, at the right stage, however the bytes
// are split into reads and writes, and refuses an answer to nothing outstanding.
func TestAckTap(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 70000) // a remaining length of three bytes
	w := func(b []byte) step { return step{true, b} }
	r := func(b []byte) step { return step{false, b} }
	cases := []struct {
		name  string
		steps []step
		bad   bool
	}{
		{"qos1 acked", []step{w(encode(t, publish(1, 1, "t", []byte("m")))), r(encode(t, ack(packets.PUBACK, 1)))}, false},
		{"qos1 big acked", []step{w(encode(t, publish(7, 1, "a/b", big))), r(encode(t, ack(packets.PUBACK, 7)))}, false},
		{"two in one write", []step{w(encode(t, publish(1, 1, "t", nil), publish(2, 1, "t", nil))), r(encode(t, ack(packets.PUBACK, 2), ack(packets.PUBACK, 1)))}, false},
		{"qos2 flow", []step{w(encode(t, publish(3, 2, "t", nil))), r(encode(t, ack(packets.PUBREC, 3))), w(encode(t, ack(packets.PUBREL, 3))), r(encode(t, ack(packets.PUBCOMP, 3)))}, false},
		{"suback", []step{w(encode(t, subscribe(9))), r(encode(t, ack(packets.SUBACK, 9)))}, false},
		{"qos0 needs no ack", []step{w(encode(t, publish(0, 0, "t", nil)))}, false},
		{"id reused after its ack", []step{w(encode(t, publish(1, 1, "t", nil))), r(encode(t, ack(packets.PUBACK, 1))), w(encode(t, publish(1, 1, "t", nil))), r(encode(t, ack(packets.PUBACK, 1)))}, false},
		{"ack never sent", []step{w(encode(t, publish(1, 1, "t", nil))), r(encode(t, ack(packets.PUBACK, 2)))}, true},
		{"ack twice", []step{w(encode(t, publish(1, 1, "t", nil))), r(encode(t, ack(packets.PUBACK, 1), ack(packets.PUBACK, 1)))}, true},
		{"puback for qos2", []step{w(encode(t, publish(1, 2, "t", nil))), r(encode(t, ack(packets.PUBACK, 1)))}, true},
		{"pubcomp before pubrel", []step{w(encode(t, publish(1, 2, "t", nil))), r(encode(t, ack(packets.PUBREC, 1), ack(packets.PUBCOMP, 1)))}, true},
		{"ack before anything", []step{r(encode(t, ack(packets.PUBACK, 1)))}, true},
		{"malformed length", []step{r([]byte{0x40, 0xff, 0xff, 0xff, 0xff, 0x01})}, true},
		// 200 MiB announced: refused before paho allocates it.
		{"huge packet", []step{r([]byte{0x30, 0x80, 0x80, 0x80, 0x64})}, true},
		{"big write is no inbound limit", []step{w(encode(t, publish(1, 1, "t", big))), r(encode(t, ack(packets.PUBACK, 1)))}, false},
	}
	for _, tc := range cases {
		for _, split := range []int{1, 3, 1 << 20} {
			var violations int
			tap := newAckTap(func(error) { violations++ })
			var err error
			for _, st := range tc.steps {
				for b := st.b; len(b) > 0 && err == nil; {
					n := min(split, len(b))
					if st.write {
						tap.wrote(b[:n])
					} else {
						err = tap.read(b[:n])
					}
					b = b[n:]
				}
			}
			if (err != nil) != tc.bad || (err != nil && !errors.Is(err, errProtocol)) {
				t.Errorf("%s, chunks of %d: %v, want a violation: %v", tc.name, split, err, tc.bad)
			}
			if (violations > 0) != tc.bad {
				t.Errorf("%s, chunks of %d: %d violations counted", tc.name, split, violations)
			}
		}
	}
}
