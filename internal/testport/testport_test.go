package testport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddr: every address is in range, listenable, and not handed out twice while reserved.
func TestAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr := Addr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < First || port > Last {
			t.Fatalf("%s outside %d..%d", addr, First, Last)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		_ = l.Close()
	}
}

// TestAddrSkipsReservedAndTaken: a port reserved by another holder or listened on by anyone is
// never returned.
func TestAddrSkipsReservedAndTaken(t *testing.T) {
	var listeners []net.Listener
	t.Cleanup(func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	})
	dir, err := lockDir()
	if err != nil {
		t.Fatal(err)
	}
	taken := map[int]bool{}
	for port := First; port+1 <= Last; port += 4 { // and port+2, port+3 left free
		f, ok, err := reserve(dir, port)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Cleanup(func() { _ = f.Close() })
			taken[port] = true
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1))); err == nil {
			listeners = append(listeners, l)
			taken[port+1] = true
		}
	}
	for range 20 {
		_, p, _ := net.SplitHostPort(Addr(t))
		port, _ := strconv.Atoi(p)
		if taken[port] {
			t.Fatalf("port %d was reserved or listened on, and handed out", port)
		}
	}
}
