package admin

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"
)

// fakeServer answers one command per connection with answer(request).
func fakeServer(t *testing.T, answer func(req *Command) *Command) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := readCommand(conn)
				if err != nil {
					return
				}
				resp := answer(req)
				if resp == nil {
					time.Sleep(time.Second) // never answers in time
					return
				}
				resp.Opaque, resp.Flag = req.Opaque, 1
				header, _ := json.Marshal(resp)
				frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(resp.Body)))
				frame = binary.BigEndian.AppendUint32(frame, uint32(len(header)))
				_, _ = conn.Write(append(append(frame, header...), resp.Body...))
			}()
		}
	}()
	return ln.Addr().String()
}

func TestBrokersFromFastJSON(t *testing.T) {
	// as a RocketMQ 5 name server writes it: integer map keys unquoted
	body := `{"brokerAddrTable":{"broker-b":{"brokerAddrs":{0:"127.0.0.1:10921",1:"127.0.0.1:10931"},"brokerName":"broker-b","cluster":"C"},` +
		`"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"},` +
		`"slave-only":{"brokerAddrs":{1:"127.0.0.1:10941"},"brokerName":"slave-only","cluster":"C"}},` +
		`"clusterAddrTable":{"C":["broker-a","broker-b","slave-only"]}}`
	addr := fakeServer(t, func(req *Command) *Command {
		if req.Code != codeGetBrokerClusterInfo {
			return &Command{Code: 1, Remark: "unexpected"}
		}
		return &Command{Code: 0, Body: []byte(body)}
	})
	got, err := (&Client{}).Brokers(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	want := []Broker{{"C", "broker-a", "127.0.0.1:10911"}, {"C", "broker-b", "127.0.0.1:10921"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got[0].String() != "broker-a@127.0.0.1:10911" {
		t.Errorf("String() = %q", got[0].String())
	}
}

func TestCreateTopicChecksTheAnswer(t *testing.T) {
	var seen map[string]string
	addr := fakeServer(t, func(req *Command) *Command {
		seen = req.ExtFields
		return &Command{Code: 16, Remark: "no permission"}
	})
	c := &Client{Creds: Credentials{AccessKey: "ak", SecretKey: "sk"}}
	err := c.CreateTopic(context.Background(), addr, "t1", 4)
	if ce, ok := err.(*CodeError); !ok || ce.Code != 16 {
		t.Fatalf("err = %v, want CodeError 16", err)
	}
	if seen["topic"] != "t1" || seen["readQueueNums"] != "4" || seen["AccessKey"] != "ak" || seen["Signature"] == "" {
		t.Errorf("request fields %v", seen)
	}
}

func TestCallHonoursContext(t *testing.T) {
	addr := fakeServer(t, func(*Command) *Command { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := (&Client{}).BrokerVersion(ctx, addr); err == nil {
		t.Fatal("no error from a server that never answers")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("returned after %v, want about 100ms", d)
	}
}

func TestRouteOfMissingTopic(t *testing.T) {
	addr := fakeServer(t, func(*Command) *Command { return &Command{Code: resTopicNotExist, Remark: "No topic route info"} })
	route, err := (&Client{}).Route(context.Background(), addr, "nope")
	if err != nil || route != nil {
		t.Fatalf("route %v err %v, want nil, nil", route, err)
	}
}

// Call believes only the response to its request: another opaque, garbage or an endless stream of
// server requests is a protocol violation, not an answer (nor a wait until the deadline).
func TestCallChecksTheAnswer(t *testing.T) {
	frame := func(c Command) []byte {
		header, _ := json.Marshal(c)
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
		b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
		return append(b, header...)
	}
	cases := []struct {
		name   string
		answer func(req *Command) []byte
		ok     bool
	}{
		{"its own answer after a server request", func(req *Command) []byte {
			return append(frame(Command{Code: 40, Opaque: 7}), frame(Command{Code: 0, Opaque: req.Opaque, Flag: 1})...)
		}, true},
		{"another request's answer first", func(req *Command) []byte {
			return append(frame(Command{Code: 0, Opaque: req.Opaque + 1, Flag: 1}), frame(Command{Code: 0, Opaque: req.Opaque, Flag: 1})...)
		}, false},
		{"a request with its opaque, flag not a response, forever", func(req *Command) []byte {
			var b []byte
			for range maxServerRequests + 1 {
				b = append(b, frame(Command{Code: 0, Opaque: req.Opaque})...)
			}
			return b
		}, false},
		{"garbage", func(*Command) []byte { return []byte("\x00\x00\x00\x0eGARBAGE-NOT-OK") }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			t.Cleanup(func() { ln.Close(); <-done })
			go func() {
				defer close(done)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				req, err := readCommand(conn)
				if err != nil {
					return
				}
				_, _ = conn.Write(tc.answer(req))
				_, _ = conn.Read(make([]byte, 1)) // until the client hangs up
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := (&Client{}).Call(ctx, ln.Addr().String(), codeGetBrokerRuntimeInfo, nil, nil)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Call: %v", err)
			case !tc.ok && !errors.Is(err, ErrProtocol):
				t.Fatalf("Call: %+v, %v, want a protocol violation", resp, err)
			}
		})
	}
}

// record encodes one pulled message as a broker stores it (MessageDecoder's layout, IPv4 hosts).
func record(topic string, queue int32, offset int64, body []byte, bodyLen int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0) // size, patched
	b = binary.BigEndian.AppendUint32(b, 0xdaa320a7)
	b = binary.BigEndian.AppendUint32(b, 0) // body CRC
	b = binary.BigEndian.AppendUint32(b, uint32(queue))
	b = binary.BigEndian.AppendUint32(b, 0) // flag
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint64(b, 0) // physical offset
	b = binary.BigEndian.AppendUint32(b, 0) // sysFlag
	b = binary.BigEndian.AppendUint64(b, 0) // born timestamp
	b = append(b, 127, 0, 0, 1, 0, 0, 0x27, 0x10)
	b = binary.BigEndian.AppendUint64(b, 0) // store timestamp
	b = append(b, 127, 0, 0, 1, 0, 0, 0x2a, 0x9f)
	b = binary.BigEndian.AppendUint32(b, 0) // reconsume times
	b = binary.BigEndian.AppendUint64(b, 0) // prepared transaction offset
	b = binary.BigEndian.AppendUint32(b, uint32(bodyLen))
	b = append(b, body...)
	b = append(b, byte(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint16(b, 0) // no properties
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

// A pull answer is believed only as messages of the queue pulled, from the offset asked, in records
// whose lengths hold: anything else is a protocol violation, nothing delivered (and never a panic).
func TestPullChecksTheMessages(t *testing.T) {
	ok := record("t", 2, 10, []byte("hello"), 5)
	cases := []struct {
		name string
		body []byte
		want int // messages; -1: a protocol violation
	}{
		{"two messages", append(append([]byte{}, ok...), record("t", 2, 11, []byte("again"), 5)...), 2},
		{"another topic's", record("other", 2, 10, []byte("x"), 1), -1},
		{"another queue's", record("t", 3, 10, []byte("x"), 1), -1},
		{"before the offset asked", record("t", 2, 9, []byte("x"), 1), -1},
		{"negative body length", record("t", 2, 10, []byte("x"), -1<<31), -1},
		{"body past its record", record("t", 2, 10, []byte("x"), 1000), -1},
		{"record size past the body", ok[:len(ok)-1], -1},
		{"garbage", []byte("GARBAGE-NOT-OK"), -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, func(req *Command) *Command {
				return &Command{Code: resSuccess, ExtFields: map[string]string{"nextBeginOffset": "12"}, Body: tc.body}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			msgs, _, err := (&Client{}).Pull(ctx, addr, "g", "t", 2, 10, 32)
			switch {
			case tc.want < 0 && !errors.Is(err, ErrProtocol):
				t.Fatalf("Pull: %d messages, %v, want a protocol violation", len(msgs), err)
			case tc.want >= 0 && (err != nil || len(msgs) != tc.want):
				t.Fatalf("Pull: %d messages, %v, want %d", len(msgs), err, tc.want)
			}
			if tc.want == 2 && (string(msgs[0].Body) != "hello" || string(msgs[1].Body) != "again") {
				t.Errorf("bodies %q, %q", msgs[0].Body, msgs[1].Body)
			}
		})
	}
}
