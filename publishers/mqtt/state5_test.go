package mqtt

import (
	"bytes"
	"testing"

	"github.com/eclipse/paho.golang/packets"
	pahosession "github.com/eclipse/paho.golang/paho/session"
)

// A PUBREC read as the connection ends must neither race nor be answered on a connection paho has
// already let go of (unguarded, state.PacketReceived writes PUBREL to a nil connection and panics).
func TestGuardedStatePubrecAfterConnectionLost(t *testing.T) {
	var w bytes.Buffer
	g := newGuardedState()
	if err := g.ConAckReceived(&w, &packets.Connect{CleanStart: true}, &packets.Connack{}); err != nil {
		t.Fatalf("ConAckReceived: %v", err)
	}
	pubrec := func() *packets.ControlPacket {
		cp := packets.NewControlPacket(packets.PUBREC)
		cp.Content.(*packets.Pubrec).PacketID = 7
		return cp
	}

	// Connected: an unknown id is answered with PUBREL 0x92 on the connection.
	if err := g.PacketReceived(pubrec(), nil); err != nil {
		t.Fatalf("PacketReceived while connected: %v", err)
	}
	if w.Len() == 0 {
		t.Fatal("PUBREC while connected: no PUBREL written")
	}
	if err := g.ConnectionLost(nil); err != nil {
		t.Fatalf("ConnectionLost: %v", err)
	}
	w.Reset()
	if err := g.PacketReceived(pubrec(), nil); err != pahosession.ErrNoConnection {
		t.Fatalf("PacketReceived after ConnectionLost = %v, want %v", err, pahosession.ErrNoConnection)
	}
	if w.Len() != 0 {
		t.Fatalf("PUBREC after ConnectionLost: %d bytes written", w.Len())
	}
}
