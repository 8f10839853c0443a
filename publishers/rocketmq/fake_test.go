package rocketmq_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// startFake starts a RocketMQ name server, which behaves, and one broker ("fake-a") that misbehaves
// as m. The name server answers the cluster info and every topic's route (4 queues on fake-a); the
// broker answers SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (binary or JSON headers), and
// everything else (heart-beats) with success. Its
// guessed opaques are the opaque it got plus 1, 2, 3; with none seen yet, 1, 2, 3. RocketMQ has no
// handshake: AheadOfHandshake answers right after accepting, CloseAfterHandshake closes right then.
// Stored are the messages of every send it acknowledges or would (Garbage and Flood store none).
// Addrs is the name server.
func startFake(t testing.TB, m publishertest.Misbehaviour) publishertest.Fake {
	f := &fakeRocketMQ{M: m}
	f.broker = publishertest.StartFakeServer(t, f.serveBroker)
	f.ns = publishertest.StartFakeServer(t, f.serveNameServer)
	return f
}

type fakeRocketMQ struct {
	M          publishertest.Misbehaviour
	ns, broker *publishertest.FakeServer
	via        string // what the name server names as the broker's address (a proxy); empty: broker's
	// routeDelay delays the name server's answers to topic route requests, createDelay the broker's to
	// UPDATE_AND_CREATE_TOPIC; negative: never answered.
	routeDelay, createDelay time.Duration
	creates                 atomic.Int32 // UPDATE_AND_CREATE_TOPIC requests the broker got
	// holdRoutes, once set, leaves every later topic route request unanswered
	holdRoutes atomic.Bool
}

// hold delays an answer by d; false: never answer (d negative).
func hold(d time.Duration) bool {
	if d < 0 {
		return false
	}
	time.Sleep(d)
	return true
}

func (f *fakeRocketMQ) Addrs() []string        { return []string{f.ns.Addr()} }
func (f *fakeRocketMQ) Stored() map[string]int { return f.broker.StoredCopy() }
func (f *fakeRocketMQ) Close() {
	f.ns.Close()
	f.broker.Close()
}

// Remoting request codes the fake knows.
const (
	fakeRMQSend        = 10 // SEND_MESSAGE, rocketmq-client-go's
	fakeRMQHeartBeat   = 34
	fakeRMQSendV2      = 310
	fakeRMQSendBatch   = 320
	fakeRMQRouteInfo   = 105
	fakeRMQClusterInfo = 106
)

type fakeRMQRequest struct {
	code   int
	opaque int32
	flag   int
	ext    map[string]string
	body   []byte
}

// readFakeRMQRequest reads one remoting command, its header JSON (0) or binary (1).
func readFakeRMQRequest(r io.Reader) (fakeRMQRequest, error) {
	var q fakeRMQRequest
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return q, err
	}
	total := binary.BigEndian.Uint32(head[:4])
	typ := head[4]
	hl := binary.BigEndian.Uint32(head[4:]) & 0xFFFFFF
	if total < 4+hl || total > 8<<20 {
		return q, fmt.Errorf("fake rocketmq: frame length %d, header %d", total, hl)
	}
	buf := make([]byte, total-4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return q, err
	}
	h := buf[:hl]
	q.body = buf[hl:]
	switch typ {
	case 0:
		var j struct {
			Code      int               `json:"code"`
			Opaque    int32             `json:"opaque"`
			Flag      int               `json:"flag"`
			ExtFields map[string]string `json:"extFields"`
		}
		if err := json.Unmarshal(h, &j); err != nil {
			return q, err
		}
		q.code, q.opaque, q.flag, q.ext = j.Code, j.Opaque, j.Flag, j.ExtFields
		return q, nil
	case 1:
		return q, parseFakeRMQBinary(h, &q)
	}
	return q, fmt.Errorf("fake rocketmq: serialize type %d", typ)
}

func parseFakeRMQBinary(h []byte, q *fakeRMQRequest) error {
	short := errors.New("fake rocketmq: binary header too short")
	if len(h) < 17 {
		return short
	}
	q.code = int(binary.BigEndian.Uint16(h))
	q.opaque = int32(binary.BigEndian.Uint32(h[5:]))
	q.flag = int(binary.BigEndian.Uint32(h[9:]))
	rl := int(binary.BigEndian.Uint32(h[13:]))
	h = h[17:]
	if len(h) < rl+4 {
		return short
	}
	h = h[rl:]
	el := int(binary.BigEndian.Uint32(h))
	h = h[4:]
	if len(h) < el {
		return short
	}
	h = h[:el]
	q.ext = map[string]string{}
	for len(h) > 0 {
		if len(h) < 2 {
			return short
		}
		kl := int(binary.BigEndian.Uint16(h))
		if len(h) < 2+kl+4 {
			return short
		}
		k := string(h[2 : 2+kl])
		h = h[2+kl:]
		vl := int(binary.BigEndian.Uint32(h))
		if len(h) < 4+vl {
			return short
		}
		q.ext[k] = string(h[4 : 4+vl])
		h = h[4+vl:]
	}
	return nil
}

// fakeRMQResponse is a response frame with a JSON header.
func fakeRMQResponse(code int, opaque int32, body []byte) []byte {
	h, _ := json.Marshal(map[string]any{"code": code, "opaque": opaque, "flag": 1, "language": "JAVA", "version": 0,
		"extFields": map[string]string{"msgId": "FAKE", "queueId": "0", "queueOffset": "0"}})
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(h)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	return append(append(b, h...), body...)
}

func (f *fakeRocketMQ) serveNameServer(c *publishertest.FakeConn) {
	r := bufio.NewReader(c)
	for {
		q, err := readFakeRMQRequest(r)
		if err != nil {
			return
		}
		addr := f.via
		if addr == "" {
			addr = f.broker.Addr()
		}
		brokerData := fmt.Sprintf(`{"cluster":"fake","brokerName":"fake-a","brokerAddrs":{"0":%q}}`, addr)
		var body string
		code := 0
		switch q.code {
		case fakeRMQClusterInfo:
			body = `{"brokerAddrTable":{"fake-a":` + brokerData + `},"clusterAddrTable":{"fake":["fake-a"]}}`
		case fakeRMQRouteInfo:
			if !hold(f.routeDelay) || f.holdRoutes.Load() {
				continue
			}
			body = `{"queueDatas":[{"brokerName":"fake-a","readQueueNums":4,"writeQueueNums":4,"perm":6}],"brokerDatas":[` + brokerData + `]}`
		default:
			code = 1 // SYSTEM_ERROR: the fake knows no more
		}
		if c.Send(fakeRMQResponse(code, q.opaque, []byte(body))) != nil {
			return
		}
	}
}

func (f *fakeRocketMQ) serveBroker(c *publishertest.FakeConn) {
	var last atomic.Int32 // the last opaque received, for the flood's guesses
	switch f.M {
	case publishertest.CloseAfterHandshake:
		return
	case publishertest.AheadOfHandshake:
		if c.Send(append(fakeRMQResponse(0, 1, nil), fakeRMQResponse(0, 2, nil)...)) != nil {
			return
		}
	case publishertest.Flood:
		c.Flood(func(i int) []byte { return fakeRMQResponse(0, last.Load()+int32(i%3)+1, nil) })
	}
	r := bufio.NewReader(c)
	a := publishertest.Answerer{M: f.M}
	for {
		q, err := readFakeRMQRequest(r)
		if err != nil {
			return
		}
		var bodies [][]byte
		switch q.code {
		case fakeRMQSend, fakeRMQSendV2:
			bodies = [][]byte{q.body}
		case fakeRMQSendBatch:
			if bodies, err = fakeRMQBatch(q.body); err != nil {
				_ = c.Send(fakeRMQResponse(13, q.opaque, nil))
				return
			}
		default: // heart-beats and the rest: acknowledged
			if q.code == fakeRMQCreateTopic {
				f.creates.Add(1)
				if !hold(f.createDelay) {
					continue
				}
			}
			if c.Send(fakeRMQResponse(0, q.opaque, nil)) != nil {
				return
			}
			continue
		}
		last.Store(q.opaque)
		answer := a.Answer(func() { f.broker.Store(bodies...) }, fakeRMQResponse(0, q.opaque, nil),
			func(k int) []byte { return fakeRMQResponse(0, q.opaque+int32(k), nil) }, []byte("\x00\x00\x00\x0eGARBAGE-NOT-OK"))
		if answer != nil && c.Send(answer) != nil {
			return
		}
	}
}

// fakeRMQBatch splits a batch body (MessageDecoder.encodeMessages' layout) into message bodies.
func fakeRMQBatch(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 20 {
			return nil, errors.New("fake rocketmq: short batch")
		}
		size := binary.BigEndian.Uint32(b)
		bl := binary.BigEndian.Uint32(b[16:])
		if uint64(size) > uint64(len(b)) || 20+uint64(bl) > uint64(size) {
			return nil, errors.New("fake rocketmq: bad batch")
		}
		out = append(out, append([]byte(nil), b[20:20+bl]...))
		b = b[size:]
	}
	return out, nil
}
