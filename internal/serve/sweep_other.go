//go:build !linux

package serve

import "net"

// sweep is Linux-only (accept4 on the raw socket); elsewhere a connection that queued after the drain's
// last Accept is reset by the close, as docs/operations.md says.
func sweep(*net.TCPListener) []net.Conn { return nil }
