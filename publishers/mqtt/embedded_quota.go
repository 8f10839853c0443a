package mqtt

import (
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// noSendQuota keeps every client of an embedded server away from mochi-mqtt v2.7.9's deadlock: after
// each packet a client sends, mochi calls Inflight.NextImmediate when the client has messages in flight
// and send quota left (server.go, processPacket), and NextImmediate takes the in-flight map's read lock
// twice (inflight.go, lines 95-99): a publisher's Inflight.Set waiting for the write lock between the
// two blocks both, and then the whole server. The send quota is the client's Receive Maximum, which
// mochi sets from CONNECT and again when a session is taken over; with it zero (a maximum of zero is
// what an MQTT 3.1.1 client, which has no Receive Maximum, gets), IncreaseSendQuota never raises it, no
// message is held back for quota (Expiry -1) and NextImmediate is never called.
//
// The price: the server no longer holds messages back beyond a client's Receive Maximum (as mosquitto
// does); a client gets up to embeddedInflight unacknowledged messages, TCP holding back the rest.
type noSendQuota struct{ mochi.HookBase }

func (h *noSendQuota) ID() string { return "mqtarget-no-send-quota" }

func (h *noSendQuota) Provides(b byte) bool {
	return b == mochi.OnConnect || b == mochi.OnSessionEstablished
}

// OnConnect runs after mochi set the quota from CONNECT, before the client can subscribe.
func (h *noSendQuota) OnConnect(cl *mochi.Client, _ packets.Packet) error {
	cl.State.Inflight.ResetSendQuota(0)
	return nil
}

// OnSessionEstablished runs after a taken-over session's in-flight messages (and with them its quota)
// were inherited, and before the client's first packet is read. A message held back for quota in the
// moment between would wait for a NextImmediate that no longer comes: it is written now and stays in
// flight, acknowledged or expired like any other.
func (h *noSendQuota) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) {
	cl.State.Inflight.ResetSendQuota(0)
	for _, pk := range cl.State.Inflight.GetAll(true) { // one read lock: no nesting
		if cl.WritePacket(pk) != nil {
			return // the connection is gone; mochi clears what it held
		}
	}
}
