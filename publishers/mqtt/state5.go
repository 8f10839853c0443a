package mqtt

import (
	"io"
	"sync"

	"github.com/eclipse/paho.golang/packets"
	pahosession "github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"
)

// guardedState is paho.golang's in-memory session state with one hole closed. v0.23.0 answers a PUBREC
// by writing PUBREL to the state's connection, read without the state's lock (state.PacketReceived),
// while a connection's end clears it under that lock (state.ConnectionLost): a data race, and a nil
// connection written to (a panic that takes mqtarget down) when a PUBREC is read as the connection
// ends: on Close with QoS 2 publishes in flight, or when the broker drops the connection. Here a PUBREC
// is handled under a lock of our own that ConnectionLost also takes, and not at all once the connection
// is gone: its publish then fails with the connection, as it would had the PUBREC come a moment later.
type guardedState struct {
	*state.State
	mu sync.Mutex
	up bool // between a successful ConAckReceived and ConnectionLost
}

var _ pahosession.SessionManager = (*guardedState)(nil)

func newGuardedState() *guardedState { return &guardedState{State: state.NewInMemory()} }

func (g *guardedState) ConAckReceived(w io.Writer, cp *packets.Connect, ca *packets.Connack) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.State.ConAckReceived(w, cp, ca)
	g.up = err == nil
	return err
}

func (g *guardedState) ConnectionLost(dp *packets.Disconnect) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.up = false
	return g.State.ConnectionLost(dp)
}

// PacketReceived takes the lock for PUBREC only: a QoS 1/2 PUBLISH (a consumer's) blocks until paho's
// router takes it, and must not hold up the connection's end meanwhile. The PUBREL write it makes is
// bounded by writeTimeout (netConn).
func (g *guardedState) PacketReceived(recv *packets.ControlPacket, pub chan<- *packets.Publish) error {
	if recv.Type != packets.PUBREC {
		return g.State.PacketReceived(recv, pub)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.up {
		return pahosession.ErrNoConnection
	}
	return g.State.PacketReceived(recv, pub)
}
