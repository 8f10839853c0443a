package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Every answer is checked before franz-go reads it. franz-go matches an answer to the oldest request
// outstanding on its connection by correlation id, but it takes an answer that arrived before its
// request was written as that request's (a broker sending a stray answer, then dropping the request,
// had it acknowledged). checkedConn sits under franz-go, on the plain-text side of TLS, follows the
// frames both ways and fails the connection at the first answer that answers nothing written: the
// oldest outstanding request's id or nothing. franz-go then fails what was in flight on it (the
// publisher fails those publishes as unavailable), the protocol error is counted, and a new connection
// is dialled.

// maxFrame bounds a frame's announced size; franz-go's own read limit (BrokerMaxReadBytes) is 100 MiB.
const maxFrame = 1 << 30

// errStray is a protocol violation: an answer to a request not written, or not the oldest.
var errStray = errors.New("protocol violation")

// protocolErrors counts the violations per host.
type protocolErrors struct{ n []atomic.Uint64 }

// oneDialKey marks a request's context (Ping's) whose connection is dialed once: franz-go retries a
// connection that failed as it opened, up to six dials for one request (a retry on a new connection,
// each trying ApiVersions three times when the broker resets it), which publishers.PingLimit cannot
// bound.
type oneDialKey struct{}

// errPingRedial is the dial refused to a request marked with oneDialKey after its first.
var errPingRedial = errors.New("its connection failed as it was set up (a ping dials once)")

// dialer returns the client's dial function: TCP (and TLS when tc is set), wrapped in a checkedConn
// whose violations count for the host index gives the address.
func (k *cluster) dialer(tc *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if once, ok := ctx.Value(oneDialKey{}).(*atomic.Bool); ok && once.Swap(true) {
			return nil, errPingRedial
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc != nil {
			cfg := tc
			if cfg.ServerName == "" {
				cfg = cfg.Clone()
				cfg.ServerName, _, _ = net.SplitHostPort(addr)
			}
			tlsConn := tls.Client(c, cfg)
			if err := tlsConn.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
			}
			c = tlsConn
		}
		cc := &checkedConn{Conn: c}
		cc.violated = func() {
			if t := k.table.Load(); t != nil {
				if i, ok := t.index[addr]; ok {
					k.proto.n[i].Add(1)
				}
			}
			k.log.Warn("kafka: answer to no request written; connection closed", "host", addr)
		}
		return cc, nil
	}
}

// checkedConn follows the request and answer frames of one connection (size, then for a request key,
// version and correlation id, for an answer the correlation id).
type checkedConn struct {
	net.Conn
	violated func()

	mu      sync.Mutex
	written []uint32 // correlation ids of the requests written, not answered yet, oldest first
	wf, rf  frameCursor
	bad     error
}

// frameCursor walks a stream of frames: hdr collects a frame's first bytes, left counts what remains.
type frameCursor struct {
	hdr  [12]byte
	have int   // bytes of hdr collected
	left int64 // bytes of the current frame still to pass, once its header is known
}

// feed passes b through the cursor; for each frame header completed (need bytes of it) it calls got.
func (f *frameCursor) feed(b []byte, need int, got func(hdr []byte) error) error {
	for len(b) > 0 {
		if f.left > 0 {
			n := min(int64(len(b)), f.left)
			f.left -= n
			b = b[n:]
			continue
		}
		n := copy(f.hdr[f.have:need], b)
		f.have += n
		b = b[n:]
		if f.have < need {
			return nil
		}
		size := int64(int32(binary.BigEndian.Uint32(f.hdr[:4])))
		if size < int64(need-4) || size > maxFrame {
			return fmt.Errorf("%w: a frame of %d bytes", errStray, size)
		}
		if err := got(f.hdr[:need]); err != nil {
			return err
		}
		f.have, f.left = 0, size-int64(need-4)
	}
	return nil
}

func (c *checkedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	err := c.wf.feed(b, 12, func(h []byte) error {
		c.written = append(c.written, binary.BigEndian.Uint32(h[8:12]))
		return nil
	})
	c.mu.Unlock()
	if err != nil { // our own requests: franz-go's framing, never wrong
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *checkedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bad != nil {
		return 0, c.bad
	}
	if ferr := c.rf.feed(b[:n], 8, func(h []byte) error {
		id := binary.BigEndian.Uint32(h[4:8])
		if len(c.written) == 0 || c.written[0] != id {
			return fmt.Errorf("%w: an answer with correlation id %d, the oldest request outstanding has %s", errStray, id, c.oldest())
		}
		c.written = c.written[1:]
		return nil
	}); ferr != nil {
		c.bad = ferr
		c.Conn.Close()
		c.violated()
		return 0, ferr
	}
	return n, err
}

func (c *checkedConn) oldest() string {
	if len(c.written) == 0 {
		return "none (none outstanding)"
	}
	return fmt.Sprint(c.written[0])
}

// ProtocolErrors is the number of host's connections closed for an answer to no request written
// (publishers.ProtocolErrorCounter).
func (k *cluster) ProtocolErrors(host int) uint64 {
	if host < 0 || host >= len(k.proto.n) {
		return 0
	}
	return k.proto.n[host].Load()
}
