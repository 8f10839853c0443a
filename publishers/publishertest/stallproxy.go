package publishertest

import (
	"net"
	"sync"
	"testing"
)

// StallProxy relays TCP connections to a target. Stalled, it neither reads nor forwards, as a frozen
// broker (SIGSTOP) whose socket buffers fill; thawed, it goes on with what waited.
type StallProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	stalled bool
	thaw    *sync.Cond
	conns   []net.Conn
	wg      sync.WaitGroup
}

// StartStallProxy relays 127.0.0.1:<ephemeral> to target until the test ends. readBuffer, when not
// 0, is the receive buffer of each client connection, so a stalled proxy's buffers fill quickly.
func StartStallProxy(t testing.TB, target string, readBuffer int) *StallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &StallProxy{ln: ln}
	p.thaw = sync.NewCond(&p.mu)
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			if readBuffer > 0 {
				_ = c.(*net.TCPConn).SetReadBuffer(readBuffer)
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(c, up) })
			p.wg.Go(func() { p.pipe(up, c) })
		}
	})
	t.Cleanup(func() {
		p.Stall(false)
		_ = ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is where clients connect.
func (p *StallProxy) Addr() string { return p.ln.Addr().String() }

// Stall stops (on) or resumes relaying.
func (p *StallProxy) Stall(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.mu.Unlock()
	p.thaw.Broadcast()
}

// Cut closes every connection relayed so far, as a broker that dropped them.
func (p *StallProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *StallProxy) waitThawed() {
	p.mu.Lock()
	for p.stalled {
		p.thaw.Wait()
	}
	p.mu.Unlock()
}

// pipe copies src to dst, reading and writing only while thawed; it closes both when either ends.
func (p *StallProxy) pipe(src, dst net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		p.waitThawed()
		n, err := src.Read(buf)
		p.waitThawed()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
