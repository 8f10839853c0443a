package mqtt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/mqtarget/mqtarget/publishers"
)

// misbehaviour is what a fake MQTT broker does wrong.
type misbehaviour int

const (
	behave        misbehaviour = iota // a correct broker: CONNACK, PUBACK/PUBREC/PUBCOMP for each PUBLISH
	garbageAck                        // bytes that are no MQTT packet instead of the CONNACK
	refuseConnect                     // CONNACK with reason 0x87 (not authorized)
	silentConnect                     // accepts the connection, never answers the CONNECT
	wrongID                           // PUBACK naming a packet identifier that was never sent
	twice                             // every PUBACK twice
	ahead                             // PUBACK for the next packet identifier too, before it was sent
	refusePublish                     // PUBACK/PUBREC with reason 0x97 (quota exceeded)
	dropOnPublish                     // closes the connection on the first PUBLISH (killed)
	frozen                            // takes PUBLISHes and answers nothing, not even PINGREQ
	frozenFirst                       // the first connection is frozen, later ones behave
)

// fakeBroker is a misbehaving MQTT 5 broker on 127.0.0.1 for the tests, counting what it stored (the
// PUBLISHes it acknowledged honestly).
type fakeBroker struct {
	ln       net.Listener
	m        misbehaviour
	stored   atomic.Int64
	received atomic.Int64 // PUBLISH packets read, over every connection
	dups     atomic.Int64 // of them, with the DUP flag (a resend)
	payloads sync.Map     // payload -> *atomic.Int64, how many times it was read
	conns    atomic.Int64
	mu       sync.Mutex
	open     []net.Conn
	wg       sync.WaitGroup
}

func newFake(t *testing.T, m misbehaviour) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBroker{ln: ln, m: m}
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			nth := f.conns.Add(1)
			f.mu.Lock()
			f.open = append(f.open, c)
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(c, f.m == frozen || (f.m == frozenFirst && nth == 1)) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.open {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeBroker) addr() string { return f.ln.Addr().String() }

func (f *fakeBroker) serve(c net.Conn, freeze bool) {
	defer func() { _ = c.Close() }()
	if _, err := packets.ReadPacket(c); err != nil { // CONNECT
		return
	}
	switch f.m {
	case garbageAck:
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		return
	case refuseConnect:
		_, _ = (&packets.Connack{ReasonCode: 0x87}).WriteTo(c)
		return
	case silentConnect:
		_, _ = c.Read(make([]byte, 1)) // until the client gives up
		return
	}
	if _, err := (&packets.Connack{}).WriteTo(c); err != nil {
		return
	}
	for {
		cp, err := packets.ReadPacket(c)
		if err != nil {
			return
		}
		if p, ok := cp.Content.(*packets.Publish); ok {
			f.received.Add(1)
			n, _ := f.payloads.LoadOrStore(string(p.Payload), new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			if p.Duplicate {
				f.dups.Add(1)
			}
		}
		if freeze {
			continue
		}
		switch p := cp.Content.(type) {
		case *packets.Pingreq:
			_, _ = packets.NewControlPacket(packets.PINGRESP).WriteTo(c)
		case *packets.Subscribe:
			_, _ = (&packets.Suback{PacketID: p.PacketID, Reasons: []byte{0x80}}).WriteTo(c) // no $SYS here
		case *packets.Pubrel:
			_, _ = (&packets.Pubcomp{PacketID: p.PacketID}).WriteTo(c)
		case *packets.Publish:
			if !f.answer(c, p) {
				return
			}
		}
	}
}

// answer acknowledges p as the misbehaviour says; false ends the connection.
func (f *fakeBroker) answer(c net.Conn, p *packets.Publish) bool {
	ack := func(id uint16, reason byte) {
		if p.QoS == 2 {
			_, _ = (&packets.Pubrec{PacketID: id, ReasonCode: reason}).WriteTo(c)
		} else {
			_, _ = (&packets.Puback{PacketID: id, ReasonCode: reason}).WriteTo(c)
		}
	}
	switch f.m {
	case dropOnPublish:
		return false
	case wrongID:
		ack(p.PacketID+1000, 0)
	case refusePublish:
		ack(p.PacketID, 0x97)
	case twice:
		f.stored.Add(1)
		ack(p.PacketID, 0)
		ack(p.PacketID, 0)
	case ahead:
		f.stored.Add(1)
		ack(p.PacketID, 0)
		ack(p.PacketID+1, 0) // not sent yet: a broker claiming a message it never got
	default:
		if p.QoS > 0 {
			f.stored.Add(1)
			ack(p.PacketID, 0)
		}
	}
	return true
}

func fakePublisher(t *testing.T, f *fakeBroker, qos int) *Publisher {
	t.Helper()
	c := DefaultConfig()
	c.Servers = []string{f.addr()}
	c.QoS = qos
	c.DialTimeout = 300 * time.Millisecond
	c.KeepAlive = time.Second
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestMisbehavingBrokers: against each fake, what the publisher acknowledges was stored by the fake
// (never more), errors carry the documented kind, and every publish ends by its deadline.
func TestMisbehavingBrokers(t *testing.T) {
	const deadline = 700 * time.Millisecond
	cases := []struct {
		name string
		m    misbehaviour
		qos  int
		want error // the kind every publish fails with; nil: they succeed
		or   error // another kind allowed
		// proto: the broker breaks the protocol: the tap must count it, and a publish may still have
		// been acknowledged before (what the fake stored bounds what is acknowledged).
		proto bool
	}{
		{"correct qos1", behave, 1, nil, nil, false},
		{"correct qos2", behave, 2, nil, nil, false},
		{"garbage instead of CONNACK", garbageAck, 1, publishers.ErrUnavailable, nil, true},
		{"CONNACK refuses", refuseConnect, 1, publishers.ErrUnavailable, nil, false},
		// The dial the first publish waits for ends by its timeout, after the publish's deadline.
		{"no CONNACK", silentConnect, 1, publishers.ErrUnavailable, publishers.ErrTimeout, false},
		// A connection whose answers never come is dropped by the keep alive (1 s here).
		{"PUBACK for an id never sent", wrongID, 1, publishers.ErrUnavailable, nil, true},
		{"PUBREC for an id never sent", wrongID, 2, publishers.ErrUnavailable, nil, true},
		{"every PUBACK twice", twice, 1, publishers.ErrUnavailable, nil, true},
		{"every PUBREC twice", twice, 2, publishers.ErrUnavailable, nil, true},
		{"PUBACK ahead for the next id", ahead, 1, publishers.ErrUnavailable, nil, true},
		{"PUBACK refuses", refusePublish, 1, publishers.ErrRejected, nil, false},
		{"PUBREC refuses", refusePublish, 2, publishers.ErrRejected, nil, false},
		{"killed on PUBLISH", dropOnPublish, 1, publishers.ErrUnavailable, nil, false},
		{"frozen", frozen, 1, publishers.ErrTimeout, publishers.ErrUnavailable, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.m)
			p := fakePublisher(t, f, tc.qos)
			var acked int64
			for i := range 6 {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				err := p.Publish(ctx, 0, "t", []byte("m"))
				took := time.Since(start)
				cancel()
				if took > deadline+200*time.Millisecond {
					t.Errorf("publish %d took %v, past its deadline %v", i, took, deadline)
				}
				switch {
				case err == nil:
					acked++
				case tc.want == nil:
					t.Errorf("publish %d: %v, want success", i, err)
				case !errors.Is(err, tc.want) && (tc.or == nil || !errors.Is(err, tc.or)):
					t.Errorf("publish %d: %v, want %v", i, err, tc.want)
				}
				if tc.want != nil && err == nil && !tc.proto {
					t.Errorf("publish %d acknowledged by a broker that %s", i, tc.name)
				}
			}
			if n := p.ProtocolErrors(0); tc.proto != (n > 0) {
				t.Errorf("ProtocolErrors = %d, want some: %v", n, tc.proto)
			}
			if s := f.stored.Load(); acked > s {
				t.Errorf("%d acknowledged, the fake stored %d", acked, s)
			}
			if tc.m == dropOnPublish || tc.m == refuseConnect || tc.m == garbageAck {
				// The redial policy: not one connection per publish.
				if n := f.conns.Load(); n > 4 {
					t.Errorf("%d connections for 6 publishes: the host is redialled without backoff", n)
				}
			}
		})
	}
}

// TestAsyncDoneOnce: against a broker answering twice or not at all, PublishAsync's done runs exactly
// once, within the async bound, and Close ends what is left.
func TestAsyncDoneOnce(t *testing.T) {
	for _, m := range []misbehaviour{twice, frozen, dropOnPublish} {
		f := newFake(t, m)
		p := fakePublisher(t, f, 1)
		var calls [20]atomic.Int32
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			if err := p.PublishAsync(0, "t", []byte("m"), func(error) { calls[i].Add(1); wg.Done() }); err != nil {
				wg.Done()
				calls[i].Add(1) // refused: done must not run; counted as its one outcome
			}
		}
		if m == frozen {
			_ = p.Close()
		}
		wg.Wait()
		_ = p.Close()
		for i := range calls {
			if n := calls[i].Load(); n != 1 {
				t.Errorf("misbehaviour %d: publish %d: %d outcomes, want 1", m, i, n)
			}
		}
	}
}

// TestInFlightBound: with the broker frozen, async publishes beyond mqtt.max_inflight are refused at
// once (nothing queues without bound), and a sync publish waits no longer than its deadline.
func TestInFlightBound(t *testing.T) {
	f := newFake(t, frozen)
	c := DefaultConfig()
	c.Servers = []string{f.addr()}
	c.MaxInFlight = 8
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	for range 20 {
		if err := p.PublishAsync(0, "t", []byte("m"), func(error) {}); errors.Is(err, publishers.ErrUnavailable) {
			refused++
		}
	}
	if refused != 12 {
		t.Errorf("%d of 20 async publishes refused with max_inflight 8, want 12", refused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Publish(ctx, 0, "t", []byte("m")); !errors.Is(err, publishers.ErrTimeout) {
		t.Errorf("sync publish with the window full: %v, want ErrTimeout", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("sync publish took %v past its 200ms deadline", took)
	}
	_ = p.Close()
}

// TestNoResend: publishes that timed out on a frozen connection are not sent again on the next one (by
// paho's session or by us): the broker reads each PUBLISH once, none with DUP.
func TestNoResend(t *testing.T) {
	f := newFake(t, frozenFirst)
	p := fakePublisher(t, f, 1) // keep alive 1 s: the frozen connection is dropped within about 2 s
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if err := p.Publish(ctx, 0, "t", fmt.Appendf(nil, "frozen %d", i)); !errors.Is(err, publishers.ErrTimeout) && !errors.Is(err, publishers.ErrUnavailable) {
			t.Errorf("publish to the frozen connection: %v, want ErrTimeout or ErrUnavailable", err)
		}
		cancel()
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := p.Publish(ctx, 0, "t", fmt.Appendf(nil, "after %d", i))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no publish succeeded within 10s after the freeze: %v", err)
		}
		<-time.After(20 * time.Millisecond) // the host is in its redial backoff
	}
	if n := f.conns.Load(); n < 2 {
		t.Fatalf("%d connections: the frozen one was never replaced", n)
	}
	if d := f.dups.Load(); d != 0 {
		t.Errorf("%d PUBLISHes with DUP set: something resent", d)
	}
	f.payloads.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 1 {
			t.Errorf("the broker read %q %d times: sent again", k, n)
		}
		return true
	})
	if n := f.received.Load(); n < 4 {
		t.Errorf("the broker read %d PUBLISHes, want the 3 frozen ones and one after", n)
	}
	if c := p.ConnCounts(0); c.Reopened < 1 {
		t.Errorf("ConnCounts %+v: want a reopened connection", c)
	}
}
