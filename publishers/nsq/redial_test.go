package nsq

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// nsqHandshakeThen reads the magic and IDENTIFY, answers OK (an nsqd without feature negotiation)
// and runs then.
func nsqHandshakeThen(then func(*bufio.Reader, net.Conn)) func(net.Conn) {
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		if _, ok := readIdentify(r); !ok {
			return
		}
		_, _ = c.Write(nsqTestFrame(0, "OK"))
		then(r, c)
	}
}

// readIdentify reads a client's opening as a fake nsqd: the magic, then IDENTIFY and its body, which it
// returns; false when the client sent something else.
func readIdentify(r *bufio.Reader) ([]byte, bool) {
	if _, err := io.ReadFull(r, make([]byte, 4)); err != nil {
		return nil, false
	}
	if line, err := r.ReadString('\n'); err != nil || line != "IDENTIFY\n" {
		return nil, false
	}
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, false
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, false
	}
	return body, true
}

func nsqTestFrame(frameType uint32, data string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(data)))
	b = binary.BigEndian.AppendUint32(b, frameType)
	return append(b, data...)
}

// nsqServeOK answers every PUB with OK, and the size probe with nsqd's refusal.
func nsqServeOK(r *bufio.Reader, c net.Conn) { nsqServe(r, c, nil) }

// nsqServe is nsqServeOK counting the size probes in probes, unless it is nil.
func nsqServe(r *bufio.Reader, c net.Conn, probes *atomic.Int64) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if strings.Contains(line, nsqProbeTopic) {
			if probes != nil {
				probes.Add(1)
			}
			_, _ = c.Write(nsqTestFrame(1, fmt.Sprintf("E_BAD_MESSAGE PUB message too big %d > 1048576", n)))
			return
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return
		}
		if _, err := c.Write(nsqTestFrame(0, "OK")); err != nil {
			return
		}
	}
}

// nsqAnswerOneThenClose answers the first PUB and closes.
func nsqAnswerOneThenClose(r *bufio.Reader, c net.Conn) {
	line, err := r.ReadString('\n')
	if err != nil || strings.Contains(line, nsqProbeTopic) {
		return
	}
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return
	}
	if _, err := io.CopyN(io.Discard, r, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
		return
	}
	_, _ = c.Write(nsqTestFrame(0, "OK"))
}

// TestRedialBounded: publishertest.RunRedialBounded against NSQ's pool.
func TestRedialBounded(t *testing.T) {
	const slots = 2
	pub := func(t *testing.T, addr string, log *slog.Logger) publishertest.Redialer {
		c := DefaultConfig()
		c.Hosts, c.ProducersPerHost = []string{addr}, slots
		p, err := New(c, log)
		if err != nil {
			t.Fatal(err)
		}
		p.pool.Backoff = publishertest.ShortBackoff
		return p
	}
	publishertest.RunRedialBounded(t, []publishertest.RedialCase{
		{Name: "closes after the handshake", Pub: pub, Serve: nsqHandshakeThen(publishertest.CloseAtOnce), Good: nsqHandshakeThen(nsqServeOK), Slots: slots, Answered: false, Probes: slots},
		{Name: "answers one PUB and closes", Pub: pub, Serve: nsqHandshakeThen(nsqAnswerOneThenClose), Good: nsqHandshakeThen(nsqServeOK), Slots: slots, Answered: true, Probes: slots},
		{Name: "refuses", Pub: pub, Serve: nil, Good: nil, Slots: slots, Answered: false, Probes: 0},
	})
}

// TestPingBounded: publishertest.RunPingBounded against NSQ.
func TestPingBounded(t *testing.T) {
	publishertest.RunPingBounded(t, []publishertest.PingCase{
		{Name: "nsq", Serve: nsqHandshakeThen(publishertest.CloseAtOnce), Pub: func(t *testing.T, addr string) publishertest.Pinger {
			c := DefaultConfig()
			c.Hosts = []string{addr}
			p, err := New(c, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, Pool: true},
	})
}

// TestNSQProbeOnce: nsqd's size limit is probed once per host, not once per connection made, and
// again after a dial failed (nsqd may be back with another limit).
func TestNSQProbeOnce(t *testing.T) {
	var probes atomic.Int64
	var refuse atomic.Bool
	serve := nsqHandshakeThen(func(r *bufio.Reader, c net.Conn) { nsqServe(r, c, &probes) })
	srv := publishertest.StartFlapServer(t, func(c net.Conn) {
		if !refuse.Load() {
			serve(c)
		}
	}, nil)
	c := DefaultConfig()
	c.Hosts = []string{srv.Addr()}
	p, err := New(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.pool.Backoff = (publishers.Backoff{Base: time.Millisecond, Max: time.Millisecond, Healthy: time.Hour, Churn: 0})
	publish := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return p.Publish(ctx, 0, "t", []byte("m"))
	}
	dropConns := srv.DropConns
	eventually := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for err := publish(); err != nil; err = publish() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(time.Millisecond) // polling within the deadline
		}
	}
	for i := range 3 { // three connections, one after the other
		eventually(fmt.Sprint("connection ", i))
		dropConns()
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("%d probes for 3 connections, want 1", n)
	}
	refuse.Store(true)
	for deadline := time.Now().Add(5 * time.Second); p.ConnCounts(0).DialFailures == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no dial failed")
		}
		_ = publish()
	}
	refuse.Store(false)
	eventually("after the outage")
	if n := probes.Load(); n != 2 {
		t.Errorf("%d probes after an outage, want 2", n)
	}
}
