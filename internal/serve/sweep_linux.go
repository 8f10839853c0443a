//go:build linux

package serve

import (
	"net"
	"os"
	"syscall"
)

// maxSweep bounds the connections one sweep takes (a backlog holds at most somaxconn, 4096 by default).
const maxSweep = 4096

// sweep takes every connection queued in l's backlog, without waiting, right before l closes. First
// it shrinks the backlog to its least (Linux still queues one connection), so that a SYN arriving from
// then on finds the queue full and is dropped (its client retries after a second, finds the port closed
// and is refused before it sent a request) instead of completing and being reset by the close with its
// request unanswered.
func sweep(l *net.TCPListener) []net.Conn {
	rc, err := l.SyscallConn()
	if err != nil {
		return nil
	}
	var fds []int
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.Listen(int(fd), 0)
		for len(fds) < maxSweep {
			nfd, _, err := syscall.Accept4(int(fd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
			if err == syscall.EINTR || err == syscall.ECONNABORTED {
				continue
			}
			if err != nil { // EAGAIN: the backlog is empty
				return
			}
			fds = append(fds, nfd)
		}
	})
	conns := make([]net.Conn, 0, len(fds))
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "swept")
		c, err := net.FileConn(f) // a dup of fd, in the runtime's poller
		_ = f.Close()
		if err == nil {
			conns = append(conns, c)
		}
	}
	return conns
}
