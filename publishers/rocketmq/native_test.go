package rocketmq

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

func TestRocketMQClientValidate(t *testing.T) {
	for _, tc := range []struct {
		name, client string
		ok           bool
	}{
		{"native", ClientNative, true},
		{"library", ClientLibrary, true},
		{"empty", "", false},
		{"unknown", "java", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Client = tc.client
			err := c.Validate("rocketmq")
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "rocketmq.client:")) {
				t.Errorf("Validate = %v, want ok=%v naming rocketmq.client", err, tc.ok)
			}
		})
	}
}

// rmqTestRequest is a request frame as a broker decodes it.
type rmqTestRequest struct {
	code   int
	opaque int32
	ext    map[string]string
	body   []byte
}

// readRMQTestRequest decodes one binary-header request frame (RocketMQSerializable's layout).
func readRMQTestRequest(r io.Reader) (rmqTestRequest, error) {
	var q rmqTestRequest
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return q, err
	}
	if head[4] != rmqSerializeBinary {
		return q, errors.New("not a binary header")
	}
	total := binary.BigEndian.Uint32(head[:4])
	hl := binary.BigEndian.Uint32(head[4:]) & 0xFFFFFF
	buf := make([]byte, total-4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return q, err
	}
	h := buf[:hl]
	q.code = int(binary.BigEndian.Uint16(h))
	q.opaque = int32(binary.BigEndian.Uint32(h[5:]))
	rl := binary.BigEndian.Uint32(h[13:])
	h = h[17+rl:]
	ml := binary.BigEndian.Uint32(h)
	m := h[4 : 4+ml]
	q.ext = map[string]string{}
	for len(m) > 0 {
		kl := binary.BigEndian.Uint16(m)
		k := string(m[2 : 2+kl])
		m = m[2+kl:]
		vl := binary.BigEndian.Uint32(m)
		q.ext[k] = string(m[4 : 4+vl])
		m = m[4+vl:]
	}
	q.body = buf[hl:]
	return q, nil
}

// rmqTestResponse is a response frame; json picks the broker's other header format.
func rmqTestResponse(code int, opaque int32, remark string, asJSON bool) []byte {
	if asJSON {
		h, _ := json.Marshal(map[string]any{"code": code, "opaque": opaque, "flag": 1, "remark": remark, "language": "JAVA"})
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(h)))
		b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
		return append(b, h...)
	}
	b, at := rmqAppendHeader(nil, code, opaque)
	binary.BigEndian.PutUint32(b[at+8+9:], rmqFlagResponse)
	if remark != "" {
		// the remark sits before the field map: rebuild the tail
		b = b[:len(b)-8]
		b = binary.BigEndian.AppendUint32(b, uint32(len(remark)))
		b = append(b, remark...)
		b = binary.BigEndian.AppendUint32(b, 0)
		hl := len(b) - at - 8
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
		b[at+5], b[at+6], b[at+7] = byte(hl>>16), byte(hl>>8), byte(hl)
		return b
	}
	return rmqFinishFrame(b, at, []byte("ignored body"))
}

func TestRMQSendFrame(t *testing.T) {
	n := newRMQNative(&Publisher{cfg: DefaultConfig(), brokers: []admin.Broker{{Name: "broker-a", Addr: "x:1"}}})
	for _, tc := range []struct {
		name   string
		bodies [][]byte
		code   int
	}{
		{"one message", [][]byte{[]byte("hello")}, rmqCodeSendV2},
		{"batch", [][]byte{[]byte("one"), []byte("two!")}, rmqCodeSendBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := n.newSend("topic-x", 0, tc.bodies)
			s.queue = 3
			q, err := readRMQTestRequest(bytes.NewReader(s.encode([]byte("prefix"), 42)[len("prefix"):]))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"a": "mqtarget", "b": "topic-x", "c": "TBW102", "d": "4", "e": "3", "f": "0", "h": "0",
				"j": "0", "k": "false", "l": "0", "n": "broker-a", "m": "false"}
			if len(tc.bodies) > 1 {
				want["m"] = "true"
				want["i"] = ""
			}
			for k, v := range want {
				if q.ext[k] != v {
					t.Errorf("field %s = %q, want %q", k, q.ext[k], v)
				}
			}
			if q.code != tc.code || q.opaque != s.op.opaque(42) || q.ext["g"] == "" {
				t.Errorf("code %d opaque %d born %q", q.code, q.opaque, q.ext["g"])
			}
			if len(tc.bodies) == 1 {
				if p := q.ext["i"]; !strings.HasPrefix(p, "UNIQ_KEY\x01") || len(p) != len(rmqPropUniq)+rmqUniqLen+1 {
					t.Errorf("properties %q", p)
				}
				if string(q.body) != "hello" {
					t.Errorf("body %q", q.body)
				}
				return
			}
			// MessageDecoder's batch layout, decoded as the broker does
			var got []string
			for b := q.body; len(b) > 0; {
				size := binary.BigEndian.Uint32(b)
				bl := binary.BigEndian.Uint32(b[16:])
				got = append(got, string(b[20:20+bl]))
				pl := binary.BigEndian.Uint16(b[20+bl:])
				if props := string(b[22+bl : 22+bl+uint32(pl)]); !strings.HasPrefix(props, "UNIQ_KEY\x01") || 22+bl+uint32(pl) != size {
					t.Errorf("message %d: properties %q, size %d", len(got), props, size)
				}
				b = b[size:]
			}
			if strings.Join(got, ",") != "one,two!" {
				t.Errorf("batch bodies %q", got)
			}
			if bytes.Equal(s.ids[0][:], s.ids[1][:]) {
				t.Error("two messages with one UNIQ_KEY")
			}
		})
	}
}

func TestReadRMQAnswer(t *testing.T) {
	op := newRMQOpaques()
	for _, tc := range []struct {
		name  string
		frame []byte
		want  wire.Answer
		code  int
	}{
		{"binary success", rmqTestResponse(0, op.opaque(7), "", false), wire.Answer{Kind: wire.ByID, ID: 7}, -1},
		{"json success", rmqTestResponse(0, op.opaque(8), "", true), wire.Answer{Kind: wire.ByID, ID: 8}, -1},
		{"binary busy", rmqTestResponse(2, op.opaque(9), "[TIMEOUT_CLEAN_QUEUE]broker busy", false), wire.Answer{Kind: wire.ByID, ID: 9}, 2},
		{"json illegal", rmqTestResponse(13, op.opaque(10), "too big", true), wire.Answer{Kind: wire.ByID, ID: 10}, 13},
		{"heart-beat answer", rmqTestResponse(0, 0, "", false), wire.Answer{}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// followed by a second frame: the first must be consumed exactly
			r := bufio.NewReader(bytes.NewReader(append(tc.frame, rmqTestResponse(0, op.opaque(99), "", false)...)))
			a, err := readRMQAnswer(r, op)
			if err != nil {
				t.Fatal(err)
			}
			var ce *admin.CodeError
			gotCode := -1
			if errors.As(a.Err, &ce) {
				gotCode = ce.Code
				if ce.Remark == "" {
					t.Error("remark lost")
				}
			}
			if a.Kind != tc.want.Kind || a.ID != tc.want.ID || gotCode != tc.code {
				t.Errorf("answer %+v (code %d), want %+v (code %d)", a, gotCode, tc.want, tc.code)
			}
			if next, err := readRMQAnswer(r, op); err != nil || next.ID != 99 {
				t.Errorf("next frame %+v, %v", next, err)
			}
		})
	}
	// Opaques no request of the connection had: protocol violations, never an answer.
	for _, opaque := range []int32{-1, 1<<30 + 1, op.opaque(0)} {
		a, err := readRMQAnswer(bufio.NewReader(bytes.NewReader(rmqTestResponse(0, opaque, "", false))), op)
		if !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("response with opaque %d: %+v, %v, want a protocol violation", opaque, a, err)
		}
	}
	// Garbage where a frame should be.
	if _, err := readRMQAnswer(bufio.NewReader(bytes.NewReader([]byte("\x00\x00\x00\x02GARBAGE-NOT-OK"))), op); !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("garbage: %v, want a protocol violation", err)
	}
}

// The opaques of a connection are a permutation of its sequence numbers onto 1..2^30, keyed per
// connection: distinct, invertible, never 0, and not the sequence numbers themselves.
func TestRMQOpaques(t *testing.T) {
	a, b := newRMQOpaques(), newRMQOpaques()
	seen := map[int32]bool{}
	same, counting := 0, 0
	for seq := uint64(1); seq <= 1<<16; seq++ {
		o := a.opaque(seq)
		if o < 1 || o > 1<<30 || seen[o] {
			t.Fatalf("seq %d: opaque %d out of range or repeated", seq, o)
		}
		seen[o] = true
		if back, ok := a.seq(o); !ok || back != seq {
			t.Fatalf("seq %d: opaque %d maps back to %d, %v", seq, o, back, ok)
		}
		if o == b.opaque(seq) {
			same++
		}
		if seq > 1 && o == a.opaque(seq-1)+1 {
			counting++
		}
	}
	for _, seq := range []uint64{rmqMaxOpaque, 1<<30 - 1} {
		if back, ok := a.seq(a.opaque(seq)); !ok || back != seq {
			t.Errorf("seq %d maps back to %d, %v", seq, back, ok)
		}
	}
	if same > 4 || counting > 4 {
		t.Errorf("of 2^16 opaques %d equal another connection's, %d follow their predecessor's: not keyed", same, counting)
	}
}

func TestRMQNativeOutcome(t *testing.T) {
	code := func(c int) error { return &admin.CodeError{Code: c, Remark: "x"} }
	n := &rmqNative{}
	for _, tc := range []struct {
		name      string
		err       error
		kind      error
		notStored bool
	}{
		{"system error (may follow a put)", code(1), publishers.ErrUnavailable, false},
		{"system busy", code(2), publishers.ErrUnavailable, true},
		{"service not available", code(14), publishers.ErrUnavailable, true},
		{"no permission", code(16), publishers.ErrRejected, true},
		{"topic not exist", code(17), publishers.ErrRejected, true},
		{"message illegal", code(13), publishers.ErrRejected, false},
		{"flush disk timeout", code(10), publishers.ErrTimeout, false},
		{"not sent", publishers.Wrap(publishers.ErrUnavailable, errRMQNotSent), publishers.ErrUnavailable, true},
		{"not sent: closing", errors.Join(errRMQNotSent, publishers.ErrClosed), publishers.ErrClosed, false},
		{"timeout", publishers.Wrap(publishers.ErrTimeout, errors.New("no answer")), publishers.ErrTimeout, false},
		{"stalled", publishers.Wrap(publishers.ErrUnavailable, wire.ErrStalled), publishers.ErrTimeout, false},
		{"connection lost", publishers.Wrap(publishers.ErrUnavailable, io.EOF), publishers.ErrUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := n.result(tc.err); !errors.Is(got, tc.kind) {
				t.Errorf("result = %v, want kind %v", got, tc.kind)
			}
			if got := rmqNativeNotStored(tc.err); got != tc.notStored {
				t.Errorf("notStored = %v, want %v", got, tc.notStored)
			}
		})
	}
	if got := n.result(publishers.Wrap(publishers.ErrUnavailable, wire.ErrStalled)); errors.Is(got, publishers.ErrUnavailable) {
		t.Errorf("a stalled connection's request is ambiguous, not unavailable: %v", got)
	}
}

// fakeRMQBroker accepts connections and lets answer decide, per request, what to write back (nil: nothing).
type fakeRMQBroker struct {
	ln     net.Listener
	answer func(q rmqTestRequest) []byte
	mu     sync.Mutex
	sends  []rmqTestRequest
	wg     sync.WaitGroup
}

func newFakeRMQBroker(t *testing.T, answer func(q rmqTestRequest) []byte) *fakeRMQBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRMQBroker{ln: ln, answer: answer}
	var conns []net.Conn
	var cmu sync.Mutex
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cmu.Lock()
			conns = append(conns, c)
			cmu.Unlock()
			f.wg.Go(func() {
				for {
					q, err := readRMQTestRequest(c)
					if err != nil {
						return
					}
					if q.code != rmqCodeHeartBeat {
						f.mu.Lock()
						f.sends = append(f.sends, q)
						f.mu.Unlock()
					}
					if a := f.answer(q); a != nil {
						_, _ = c.Write(a)
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		cmu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		cmu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeRMQBroker) requests() []rmqTestRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rmqTestRequest(nil), f.sends...)
}

// newTestRMQNative is a native publisher for one fake broker, with the topic's route cached (4 queues).
func newTestRMQNative(t *testing.T, f *fakeRMQBroker, sendTimeout time.Duration, topic string) *Native {
	c := DefaultConfig()
	c.NameServers = []string{"127.0.0.1:1"}
	c.SendTimeout = sendTimeout
	p := &Native{Publisher: &Publisher{cfg: c, log: slog.New(slog.DiscardHandler), closing: make(chan struct{}), admin: &admin.Client{},
		brokers: []admin.Broker{{Name: "broker-a", Addr: f.ln.Addr().String()}}, queues: make([]atomic.Uint32, 1)}}
	p.native = newRMQNative(p.Publisher)
	r := &rmqRoute{ready: make(chan struct{}), queues: []int{4}}
	r.at.Store(time.Now().UnixNano())
	close(r.ready)
	p.native.routes.Store(topic, r)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestRMQNativeSends(t *testing.T) {
	t.Run("answers out of order", func(t *testing.T) {
		var mu sync.Mutex
		var held []rmqTestRequest
		f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte {
			mu.Lock()
			defer mu.Unlock()
			held = append(held, q)
			if len(held) < 3 {
				return nil
			}
			var out []byte
			for i := len(held) - 1; i >= 0; i-- { // newest first
				code := 0
				if string(held[i].body) == "refuse" {
					code = 13
				}
				out = append(out, rmqTestResponse(code, held[i].opaque, "refused", i%2 == 0)...)
			}
			held = nil
			return out
		})
		p := newTestRMQNative(t, f, 5*time.Second, "t")
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i, body := range []string{"a", "refuse", "c"} {
			wg.Go(func() { errs[i] = p.Publish(context.Background(), 0, "t", []byte(body)) })
		}
		wg.Wait()
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], publishers.ErrRejected) {
			t.Errorf("outcomes %v, want nil, rejected, nil", errs)
		}
	})
	t.Run("busy is resent with the same id", func(t *testing.T) {
		first := true
		var mu sync.Mutex
		f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte {
			mu.Lock()
			defer mu.Unlock()
			if first {
				first = false
				return rmqTestResponse(rmqResSystemBusy, q.opaque, "[TIMEOUT_CLEAN_QUEUE]broker busy", false)
			}
			return rmqTestResponse(0, q.opaque, "", false)
		})
		p := newTestRMQNative(t, f, 5*time.Second, "t")
		if err := p.Publish(context.Background(), 0, "t", []byte("m")); err != nil {
			t.Fatal(err)
		}
		qs := f.requests()
		if len(qs) != 2 || qs[0].ext["i"] != qs[1].ext["i"] {
			t.Errorf("%d requests, want 2 with one UNIQ_KEY: %+v", len(qs), qs)
		}
	})
	t.Run("no resend after SYSTEM_ERROR", func(t *testing.T) {
		// RocketMQ answers SYSTEM_ERROR also when a request failed after its put, and may then answer it
		// again: this broker stores every request and answers the first SYSTEM_ERROR, then SUCCESS.
		var mu sync.Mutex
		first := true
		f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte {
			mu.Lock()
			defer mu.Unlock()
			if first {
				first = false
				return append(rmqTestResponse(rmqResSystemError, q.opaque, "process request exception", false),
					rmqTestResponse(0, q.opaque, "", false)...)
			}
			return rmqTestResponse(0, q.opaque, "", false)
		})
		p := newTestRMQNative(t, f, 5*time.Second, "t")
		if err := p.Publish(context.Background(), 0, "t", []byte("m")); !errors.Is(err, publishers.ErrUnavailable) {
			t.Errorf("Publish = %v, want publishers.ErrUnavailable", err)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests reached the broker, want 1: a resend after SYSTEM_ERROR may store it twice", n)
		}
	})
	t.Run("no resend after a timeout", func(t *testing.T) {
		f := newFakeRMQBroker(t, func(rmqTestRequest) []byte { return nil })
		p := newTestRMQNative(t, f, 300*time.Millisecond, "t")
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the caller hangs up at once: the send still runs under its own deadline
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
		defer cancel2()
		if err := p.Publish(ctx2, 0, "t", []byte("m")); !errors.Is(err, publishers.ErrTimeout) {
			t.Errorf("Publish = %v, want publishers.ErrTimeout", err)
		}
		if err := p.Publish(ctx, 0, "t", []byte("m")); !errors.Is(err, context.Canceled) {
			t.Errorf("Publish with a cancelled context = %v, want context.Canceled before sending", err)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests reached the broker, want 1", n)
		}
	})
	t.Run("close fails pending", func(t *testing.T) {
		f := newFakeRMQBroker(t, func(rmqTestRequest) []byte { return nil })
		p := newTestRMQNative(t, f, 10*time.Second, "t")
		async := make(chan error, 1)
		if err := p.PublishAsync(0, "t", []byte("a"), func(err error) { async <- err }); err != nil {
			t.Fatal(err)
		}
		syncErr := make(chan error, 1)
		go func() { syncErr <- p.Publish(context.Background(), 0, "t", []byte("s")) }()
		for end := time.Now().Add(5 * time.Second); len(f.requests()) < 2; { // both written before Close
			if time.Now().After(end) {
				t.Fatalf("%d requests reached the broker within 5s, want 2", len(f.requests()))
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = p.Close()
		_ = p.Close()
		if err := <-async; !errors.Is(err, publishers.ErrClosed) {
			t.Errorf("async = %v, want publishers.ErrClosed", err)
		}
		if err := <-syncErr; !errors.Is(err, publishers.ErrClosed) {
			t.Errorf("sync = %v, want publishers.ErrClosed", err)
		}
		if err := p.Publish(context.Background(), 0, "t", []byte("late")); !errors.Is(err, publishers.ErrClosed) {
			t.Errorf("after Close = %v, want publishers.ErrClosed", err)
		}
	})
}

func TestRMQSendFrameSigned(t *testing.T) {
	c := DefaultConfig()
	c.AccessKey, c.SecretKey = "ak", "sk"
	n := newRMQNative(&Publisher{cfg: c, brokers: []admin.Broker{{Name: "broker-a", Addr: "x:1"}}})
	for _, bodies := range [][][]byte{{[]byte("hello")}, {[]byte("one"), []byte("two")}} {
		s := n.newSend("topic-x", 0, bodies)
		q, err := readRMQTestRequest(bytes.NewReader(s.encode(nil, 5)))
		if err != nil {
			t.Fatal(err)
		}
		// the broker's check: the signature over the other fields (sorted) and the body; it reads a
		// value of length 0 as null, which its StringBuilder appends as "null"
		ext := map[string]string{}
		for k, v := range q.ext {
			if v == "" {
				v = "null"
			}
			if k != "Signature" && k != "AccessKey" {
				ext[k] = v
			}
		}
		admin.Sign(ext, q.body, admin.Credentials{AccessKey: "ak", SecretKey: "sk"})
		if q.ext["AccessKey"] != "ak" || q.ext["Signature"] == "" || q.ext["Signature"] != ext["Signature"] {
			t.Errorf("%d bodies: AccessKey %q, Signature %q, want %q", len(bodies), q.ext["AccessKey"], q.ext["Signature"], ext["Signature"])
		}
		if q.ext["b"] != "topic-x" || q.ext["a"] != "mqtarget" {
			t.Errorf("fields %v", q.ext)
		}
	}
}

// TestRMQNativeConnCounts: the native path counts its connections like the pool does: the first, a
// replacement for one that broke, and a dial that failed; the library path exports none.
func TestRMQNativeConnCounts(t *testing.T) {
	f := newFakeRMQBroker(t, func(q rmqTestRequest) []byte { return rmqTestResponse(0, q.opaque, "", false) })
	p := newTestRMQNative(t, f, 5*time.Second, "t")
	p.native.backoff.Healthy = 0 // connections breaking young are redial_test.go's
	publish := func() {
		t.Helper()
		if err := p.Publish(context.Background(), 0, "t", []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	publish()
	publish()
	if got, want := p.ConnCounts(0), (publishers.ConnCounts{Opened: 1}); got != want {
		t.Fatalf("after two publishes: %+v, want %+v", got, want)
	}
	p.native.conns[0].cur.Load().Close() // the connection breaks
	publish()
	if got, want := p.ConnCounts(0), (publishers.ConnCounts{Opened: 2, Reopened: 1}); got != want {
		t.Fatalf("after a reconnect: %+v, want %+v", got, want)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	p.brokers[0].Addr = dead
	p.native.conns[0].cur.Load().Close()
	if err := p.Publish(context.Background(), 0, "t", []byte("m")); !errors.Is(err, publishers.ErrUnavailable) {
		t.Fatalf("publish to a closed port: %v, want publishers.ErrUnavailable", err)
	}
	if got := p.ConnCounts(0); got.DialFailures == 0 || got.Opened != 2 {
		t.Fatalf("after a failed dial: %+v, want a dial failure and still 2 opened", got)
	}
	if _, ok := any(&Publisher{}).(publishers.ConnCounter); ok {
		t.Error("the library path counts connections: want the native path only")
	}
}
