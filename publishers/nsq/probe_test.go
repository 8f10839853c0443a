package nsq_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// An nsqd that answers the size probe (a PUB announcing 2^31-1 bytes, no body sent) with OK is lying:
// no connection is made to it (503, a protocol violation counted), rather than going on without a
// size limit and believing its next OK.
func TestNSQSizeProbeAnsweredOK(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if _, err := io.ReadFull(r, make([]byte, 4)); err != nil { // magic
					return
				}
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					var size [4]byte
					if _, err := io.ReadFull(r, size[:]); err != nil {
						return
					}
					answer := "OK" // to the PUB, before its body
					if strings.HasPrefix(line, "IDENTIFY") {
						if _, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
							return
						}
						answer = `{"version":"1.3.0"}` // no max_msg_size: the publisher probes
					}
					frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(answer)))
					frame = binary.BigEndian.AppendUint32(frame, 0)
					if _, err := c.Write(append(frame, answer...)); err != nil {
						return
					}
				}
			})
		}
	})
	c := nsq.DefaultConfig()
	c.Hosts = []string{ln.Addr().String()}
	p, err := nsq.New(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Publish(ctx, 0, "t", []byte("x")); !errors.Is(err, publishers.ErrUnavailable) || !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("publish to an nsqd whose size probe was answered OK: %v, want unavailable (protocol violation)", err)
	}
	if n := p.ProtocolErrors(0); n < 1 {
		t.Errorf("ProtocolErrors(0) = %d, want at least 1", n)
	}
}
