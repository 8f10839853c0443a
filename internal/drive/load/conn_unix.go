//go:build unix

package load

import "syscall"

// alive peeks at the idle connection without blocking: a closed one reads end of file (or an error),
// a live one has nothing to read. Bytes the target sent unasked also end it: they answer nothing, and
// the next answer read would be theirs.
func (c *conn) alive() bool {
	if c.raw == nil {
		return true
	}
	rc, err := c.raw.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = n < 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return err == nil && alive
}
