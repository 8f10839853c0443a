package mqtt

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	mochi "github.com/mochi-mqtt/server/v2"
)

// silentConn connects to addr and sends nothing.
func silentConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer: the server ends c within d (a read sees EOF or a reset, not its own timeout).
func closedByServer(c net.Conn, d time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

// connects: a client's CONNECT gets a successful CONNACK.
func connects(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	cp := packets.NewControlPacket(packets.CONNECT)
	cp.Content.(*packets.Connect).ClientID = "probe"
	cp.Content.(*packets.Connect).CleanStart = true
	if _, err := cp.WriteTo(c); err != nil {
		return err
	}
	ca, err := packets.ReadPacket(c)
	if err != nil {
		return err
	}
	if a, ok := ca.Content.(*packets.Connack); !ok || a.ReasonCode != 0 {
		return errors.New(ca.String())
	}
	return nil
}

// TestEmbeddedCloseWithSilentConnections: connections that never sent CONNECT do not keep Close
// waiting. mochi's Close waits for every connection's goroutine, and one reading a CONNECT that never
// comes waited for ever: Close gave up after closeWait and left the goroutines behind.
func TestEmbeddedCloseWithSilentConnections(t *testing.T) {
	e, err := StartEmbedded(1, EmbeddedOptions{MaxMessageSize: 1 << 20}, discard())
	if err != nil {
		t.Fatal(err)
	}
	silent := []net.Conn{silentConn(t, e.Addrs()[0]), silentConn(t, e.Addrs()[0])}
	dialRaw(t, e.Addrs()[0], "connected", 0)
	if err := connects(e.Addrs()[0]); err != nil { // the silent ones were accepted before this
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > closeWait/2 {
		t.Errorf("Close took %v", took)
	}
	for i, c := range silent {
		if err := closedByServer(c, 5*time.Second); err != nil {
			t.Errorf("silent connection %d still open after Close: %v", i, err)
		}
	}
}

// TestEmbeddedConnectionBound: a server holds at most embeddedConns connections, CONNECT sent or not;
// one more is closed at once, and once some end a client connects again. A connection that sends no
// CONNECT within the connect wait is closed.
func TestEmbeddedConnectionBound(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		e := embeddedFor(t, 1)
		addr := e.Addrs()[0]
		var silent []net.Conn
		for range embeddedConns {
			silent = append(silent, silentConn(t, addr))
		}
		if err := closedByServer(silentConn(t, addr), 5*time.Second); err != nil {
			t.Fatalf("connection %d: %v, want it closed at once", embeddedConns+1, err)
		}
		for _, c := range silent[:4] {
			_ = c.Close()
		}
		end := time.Now().Add(10 * time.Second)
		for err := connects(addr); err != nil; err = connects(addr) {
			if time.Now().After(end) {
				t.Fatalf("no connection after 4 of %d ended: %v", embeddedConns, err)
			}
			<-time.After(20 * time.Millisecond)
		}
	})
	t.Run("connect wait", func(t *testing.T) {
		const wait = 300 * time.Millisecond
		e, err := startEmbedded(1, EmbeddedOptions{MaxMessageSize: 1 << 20, connectWait: wait}, func() mochi.Hook { return new(denyHook) }, discard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		c := silentConn(t, e.Addrs()[0])
		start := time.Now()
		if err := closedByServer(c, 10*time.Second); err != nil {
			t.Fatalf("a connection silent for 10 s is still open: %v", err)
		}
		if took := time.Since(start); took < wait/2 {
			t.Errorf("closed after %v, before the connect wait %v", took, wait)
		}
		// A client that sends its CONNECT in time stays connected past the wait.
		r := dialRaw(t, e.Addrs()[0], "prompt", 0)
		<-time.After(2 * wait)
		if pr := r.roundTrip(t, packets.NewControlPacket(packets.PINGREQ)); pr.Type != packets.PINGRESP {
			t.Fatalf("after the connect wait: %v, want PINGRESP", pr)
		}
	})
}
