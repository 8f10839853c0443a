// Package testport hands a test a loopback TCP address for a process it starts (a broker, mqtarget),
// below the ephemeral range. A port taken from 127.0.0.1:0 and closed again lies in the range every
// outgoing connection on the machine draws from, so another connection may take it before the
// process binds it; below 32768 only a listener can, and the port's reservation keeps the other
// tests' listeners off it.
package testport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// The range is the tests' alone: the scripts' defaults lie elsewhere (the anchors' 23000-23999,
// the brokers' own ports), and so do the ports for hand-run experiments (27000-27999).
const (
	First = 28000
	Last  = 31999
)

// Addr returns 127.0.0.1:PORT with PORT in First..Last, free when looked at and reserved for t
// (an exclusive flock(2) on a file named after it in the temp dir's mqtarget-test-ports, released
// at t's cleanup) so that no other test of this or another process is given it meanwhile.
func Addr(t testing.TB) string {
	t.Helper()
	dir, err := lockDir()
	if err != nil {
		t.Fatalf("testport: %v", err)
	}
	n := Last - First + 1
	start := rand.IntN(n)
	for i := range n {
		port := First + (start+i)%n
		f, ok, err := reserve(dir, port)
		if err != nil {
			t.Fatalf("testport: %v", err)
		}
		if !ok {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil { // something outside the tests listens there
			_ = f.Close()
			continue
		}
		_ = l.Close()
		t.Cleanup(func() { _ = f.Close() })
		return addr
	}
	t.Fatalf("testport: no free port in %d..%d", First, Last)
	return ""
}

// lockDir is the directory of the ports' lock files, made if missing. The files stay: removing one
// another process has open would let a third lock a new file of the same name while the second
// still holds the old one.
func lockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "mqtarget-test-ports")
	return dir, os.MkdirAll(dir, 0o700)
}

// reserve takes port's lock in dir without waiting: false when another test holds it (flock locks
// belong to the open file, so this holds within one process too); an error when the lock file
// cannot be opened or locked for another reason.
func reserve(dir string, port int) (*os.File, bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.lock", port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return f, true, nil
}
