package publishertest

import (
	"net"
	"sync"
	"testing"
)

// SilentServer listens on 127.0.0.1, accepts every connection and never sends a byte: a broker whose
// handshake never comes. It returns its address; the listener and every connection close at cleanup.
func SilentServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	t.Cleanup(func() { ln.Close(); held.Wait() })
	held.Go(func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	})
	return ln.Addr().String()
}
