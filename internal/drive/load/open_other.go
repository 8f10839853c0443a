//go:build !linux

package load

import (
	"errors"
	"net"
)

// directAddr: only Linux's pacer connects by itself (open_linux.go).
type directAddr struct{}

func newDirectAddr(string, string, bool) directAddr { return directAddr{} }

type socket struct{ written int }

func (w *wire) startWritten() *socket { return nil }

func (*socket) conn() (net.Conn, error) { return nil, errors.New("no direct connect on this system") }
