package publishers_test

import (
	"bufio"
	"bytes"
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// syncBuffer collects log output from the publisher's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A broker that answers garbage: every publish fails as unavailable (503) with the protocol violation
// named, mqtarget_protocol_errors_total{broker,host} counts the violations, and the log has one line
// for them per host, however many connections the broker broke.
func TestProtocolErrorsCountedAndLoggedOnce(t *testing.T) {
	for _, tc := range fakeTargets() {
		if tc.f.NoProtocolErrors != "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			fake := tc.fake(t, publishertest.Garbage)
			defer fake.Close()
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			raw, err := tc.open(fake.Addrs(), log)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			p := publishers.NewMetrics(reg, nil).Instrument(tc.broker, raw)
			defer p.Close()
			const n = 5
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := p.Publish(ctx, 0, "protocol", []byte("garbage answered"))
				cancel()
				if !errors.Is(err, publishers.ErrUnavailable) || !errors.Is(err, wire.ErrProtocol) {
					t.Errorf("publish %d: %v, want ErrUnavailable for a protocol violation", i, err)
				}
			}
			counted := raw.(publishers.ProtocolErrorCounter).ProtocolErrors(0)
			if counted == 0 || counted > n {
				t.Errorf("ProtocolErrors(0) = %d after %d publishes answered with garbage, want 1..%d", counted, n, n)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var exported float64
			found := false
			for _, mf := range mfs {
				if mf.GetName() != "mqtarget_protocol_errors_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					l := labelsOf(m)
					if l["broker"] == tc.broker && l["host"] == raw.Hosts()[0] {
						exported, found = m.GetCounter().GetValue(), true
					}
				}
			}
			if !found || exported != float64(counted) {
				t.Errorf("mqtarget_protocol_errors_total{broker=%q,host=%q} = %v (exported: %v), want %d", tc.broker, raw.Hosts()[0], exported, found, counted)
			}
			if got := strings.Count(logs.String(), "broke the protocol"); got != 1 {
				t.Errorf("%d log lines about the protocol violations, want 1:\n%s", got, logs.String())
			}
			if strings.Contains(logs.String(), "connection lost with commands pending") {
				t.Errorf("each violation logged again as a lost connection:\n%s", logs.String())
			}
		})
	}
}

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
