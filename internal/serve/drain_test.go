package serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// TestDrainCloseTakesTheBacklog: connections that queued in the backlog after the drain's last Accept
// (here: no Accept runs at all while they connect and send their requests) are handed out by Accept
// after the close, instead of being reset by it with their requests unanswered.
func TestDrainCloseTakesTheBacklog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sweep of the backlog is Linux-only (sweep_other.go)")
	}
	tl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := newDrainListener(tl)
	defer l.Close()
	l.Drain(10*time.Millisecond, time.Second)
	const n = 5
	clients := make([]net.Conn, n)
	for i := range clients {
		c, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	if err := l.Close(); err != nil { // the drain's bound ran out: app.drain closes it
		t.Fatal(err)
	}
	for i := range n {
		c, err := l.Accept()
		if err != nil {
			t.Fatalf("Accept %d after the close: %v, want the connection queued before it", i, err)
		}
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
		_ = c.Close()
		_ = req.Body.Close()
	}
	if c, err := l.Accept(); err != errDrained {
		t.Fatalf("Accept once the backlog is handed out: %v %v, want errDrained", c, err)
	}
	for i, c := range clients {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("client %d: no answer: %v", i, err)
		}
		_ = resp.Body.Close()
	}
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Error("a connection after the close was accepted by the kernel")
	}
}
