package load

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
)

// directAddr is the target's socket address when the pacer may connect by itself: plain HTTP to an IP
// address (a name would need a lookup, TLS a handshake: both are the worker's).
type directAddr struct {
	sa     syscall.Sockaddr // nil: no direct connect
	family int
}

func newDirectAddr(host, port string, plain bool) directAddr {
	ip, err := netip.ParseAddr(host)
	p, perr := strconv.ParseUint(port, 10, 16)
	if !plain || err != nil || perr != nil || ip.Zone() != "" {
		return directAddr{}
	}
	if ip.Is4() || ip.Is4In6() {
		return directAddr{sa: &syscall.SockaddrInet4{Port: int(p), Addr: ip.Unmap().As4()}, family: syscall.AF_INET}
	}
	return directAddr{sa: &syscall.SockaddrInet6{Port: int(p), Addr: ip.As16()}, family: syscall.AF_INET6}
}

// socket is a connection the pacer opened and began a request on; written bytes of it went out.
type socket struct {
	fd      int
	written int
}

// startWritten opens a non-blocking TCP socket to the target, starts connecting and writes as much of
// the request as the socket takes at once (to a target on this machine the handshake is done by
// the time connect returns, and all of a request up to inlineWriteMax goes out), all without waiting:
// three syscalls on the pacer's thread. nil: nothing was sent (no direct address, or the connect or
// write failed at once), and a worker connects as usual, finding out why.
func (w *wire) startWritten() *socket {
	if w.direct.sa == nil {
		return nil
	}
	fd, err := syscall.Socket(w.direct.family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	if err := syscall.Connect(fd, w.direct.sa); err != nil && !errors.Is(err, syscall.EINPROGRESS) {
		_ = syscall.Close(fd)
		return nil
	}
	n, err := syscall.Write(fd, w.request[:min(len(w.request), inlineWriteMax)])
	switch {
	case n > 0:
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOTCONN):
		n = 0 // still connecting: the worker writes it all once connected
	default:
		_ = syscall.Close(fd) // nothing went out
		return nil
	}
	return &socket{fd: fd, written: n}
}

// conn makes s a net.Conn (the runtime's poller takes it over; TCP_NODELAY as on every Go TCP conn).
func (s *socket) conn() (net.Conn, error) {
	f := os.NewFile(uintptr(s.fd), "load")
	defer f.Close() // FileConn holds a duplicate
	return net.FileConn(f)
}
