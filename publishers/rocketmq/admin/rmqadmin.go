// Package rmqadmin speaks the few RocketMQ remoting commands that rocketmq-client-go v2 does not offer
// publicly: cluster info from the name server, topic routes, topic creation with the broker's answer
// checked, queue offsets and raw pulls. The publisher uses it to discover the cluster's brokers and to
// create topics; the integration harness uses it to count and read back what a broker stored.
//
// Each call opens its own TCP connection, sends one JSON-serialised command and reads one answer,
// bounded by ctx. That is slow compared with the client's pooled connections, and fine for start-up,
// topic creation, health checks and tests.
package admin

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Request codes (org.apache.rocketmq.remoting.protocol.RequestCode).
const (
	codePullMessage          = 11
	codeCreateTopic          = 17
	codeGetMaxOffset         = 30
	codeGetBrokerRuntimeInfo = 28
	codeGetRouteInfoByTopic  = 105
	codeGetBrokerClusterInfo = 106
)

// Response codes (ResponseCode).
const (
	resSuccess        = 0
	resTopicNotExist  = 17
	resPullNotFound   = 19
	resPullRetry      = 20
	resPullOffsetMove = 21
)

// Credentials sign requests for brokers with ACL enabled (RocketMQ ACL 1.0, HMAC-SHA1); zero means none.
type Credentials struct {
	AccessKey, SecretKey string
}

// Client calls name servers and brokers.
type Client struct {
	Creds Credentials
	// TLS, when not nil, runs every connection over TLS; an empty ServerName is set to each address's host.
	TLS *tls.Config
}

// Command is a remoting command: the header's fields and the body.
type Command struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int               `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	Body      []byte            `json:"-"`
}

// CodeError is a broker or name server answer other than success.
type CodeError struct {
	Code   int
	Remark string
}

func (e *CodeError) Error() string { return fmt.Sprintf("CODE: %d, DESC: %s", e.Code, e.Remark) }

var opaque atomic.Int32

// ErrProtocol marks an answer no correct name server or broker sends: a malformed frame, a response to
// another request (Call makes one request per connection), or requests from the server instead of the
// answer.
var ErrProtocol = errors.New("rocketmq protocol violation")

// maxServerRequests bounds the requests from the server Call skips while it waits for its answer (a
// broker may send one; an endless stream of them is no answer).
const maxServerRequests = 16

// Call sends one command to addr and returns the answer; answers with a non-success code are returned
// too (callers decide), transport failures are errors.
func (c *Client) Call(ctx context.Context, addr string, code int, ext map[string]string, body []byte) (*Command, error) {
	if ext == nil {
		ext = map[string]string{}
	}
	if c.Creds.AccessKey != "" {
		sign(ext, body, c.Creds)
	}
	req := Command{Code: code, Language: "GO", Version: 317, Opaque: opaque.Add(1), ExtFields: ext}
	header, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	conn, err := c.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	frame := make([]byte, 8, 8+len(header)+len(body))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(header)+len(body)))
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(header))) // serialize type 0: JSON
	frame = append(append(frame, header...), body...)
	if _, err := conn.Write(frame); err != nil {
		return nil, ctxOr(ctx, err)
	}
	for skipped := 0; ; skipped++ {
		resp, err := readCommand(conn)
		if err != nil {
			return nil, ctxOr(ctx, err)
		}
		switch {
		case resp.Flag&1 == 0 && skipped < maxServerRequests: // a request from the server: not ours to answer
		case resp.Flag&1 == 0:
			return nil, fmt.Errorf("%w: %s sent %d requests and no answer", ErrProtocol, addr, skipped+1)
		case resp.Opaque != req.Opaque:
			return nil, fmt.Errorf("%w: %s answered opaque %d to request %d, the only one on the connection", ErrProtocol, addr, resp.Opaque, req.Opaque)
		default:
			return resp, nil
		}
	}
}

// Dial connects to addr, over TLS when c.TLS is set, within ctx; the publisher's own send
// connections dial through it too, so they share the transport settings.
func (c *Client) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if c.TLS == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	tc := c.TLS
	if tc.ServerName == "" {
		tc = tc.Clone()
		tc.ServerName, _, _ = net.SplitHostPort(addr)
	}
	d := tls.Dialer{Config: tc}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("TLS to %s: %w", addr, err)
	}
	return conn, nil
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

func readCommand(r io.Reader) (*Command, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	total := binary.BigEndian.Uint32(head[0:4])
	hl := binary.BigEndian.Uint32(head[4:8])
	if hl>>24 != 0 {
		return nil, fmt.Errorf("%w: unsupported serialize type %d", ErrProtocol, hl>>24)
	}
	hl &= 0xFFFFFF
	if total < 4+hl || total > 64<<20 {
		return nil, fmt.Errorf("%w: bad frame: length %d, header %d", ErrProtocol, total, hl)
	}
	buf := make([]byte, total-4)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	var cmd Command
	if err := json.Unmarshal(buf[:hl], &cmd); err != nil {
		return nil, fmt.Errorf("%w: bad header: %v", ErrProtocol, err)
	}
	cmd.Body = buf[hl:]
	return &cmd, nil
}

// Sign adds AccessKey and Signature to ext for body, as rocketmq-client-go's ACL interceptor does; the
// publisher's own send connection signs its requests with it.
func Sign(ext map[string]string, body []byte, cr Credentials) { sign(ext, body, cr) }

// sign adds AccessKey and Signature as rocketmq-client-go's ACL interceptor does.
func sign(ext map[string]string, body []byte, cr Credentials) {
	ext["AccessKey"] = cr.AccessKey
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var content []byte
	for _, k := range keys {
		content = append(content, ext[k]...)
	}
	content = append(content, body...)
	mac := hmac.New(sha1.New, []byte(cr.SecretKey))
	mac.Write(content)
	ext["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// fastjson writes maps with integer keys unquoted ({0:"127.0.0.1:10911"}); quote them for encoding/json.
var bareIntKey = regexp.MustCompile(`([{,])(-?[0-9]+):`)

func decodeFastJSON(body []byte, v any) error {
	return json.Unmarshal(bareIntKey.ReplaceAll(body, []byte(`$1"$2":`)), v)
}

// Broker is one broker group's master.
type Broker struct {
	Cluster string
	Name    string
	Addr    string // master address host:port
}

// String is how mqtarget names a broker in replies: name@address.
func (b Broker) String() string { return b.Name + "@" + b.Addr }

type brokerData struct {
	Cluster     string            `json:"cluster"`
	BrokerName  string            `json:"brokerName"`
	BrokerAddrs map[string]string `json:"brokerAddrs"`
}

// Brokers returns the brokers with a master registered in the name server, sorted by name.
func (c *Client) Brokers(ctx context.Context, namesrv string) ([]Broker, error) {
	resp, err := c.Call(ctx, namesrv, codeGetBrokerClusterInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	if resp.Code != resSuccess {
		return nil, &CodeError{resp.Code, resp.Remark}
	}
	var info struct {
		BrokerAddrTable map[string]brokerData `json:"brokerAddrTable"`
	}
	if err := decodeFastJSON(resp.Body, &info); err != nil {
		return nil, fmt.Errorf("cluster info: %v", err)
	}
	var out []Broker
	for name, bd := range info.BrokerAddrTable {
		if addr := bd.BrokerAddrs["0"]; addr != "" {
			out = append(out, Broker{Cluster: bd.Cluster, Name: name, Addr: addr})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Route returns, per broker name, the number of read queues the topic has there; nil when the name
// server knows no such topic.
func (c *Client) Route(ctx context.Context, namesrv, topic string) (map[string]int, error) {
	qs, err := c.queueData(ctx, namesrv, topic)
	if qs == nil || err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, q := range qs {
		out[q.BrokerName] = q.ReadQueueNums
	}
	return out, nil
}

// WriteQueues returns, per broker name, the number of write queues the topic has there (0 where the
// broker forbids writes); nil when the name server knows no such topic.
func (c *Client) WriteQueues(ctx context.Context, namesrv, topic string) (map[string]int, error) {
	qs, err := c.queueData(ctx, namesrv, topic)
	if qs == nil || err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, q := range qs {
		if q.Perm&permWrite != 0 {
			out[q.BrokerName] = q.WriteQueueNums
		} else {
			out[q.BrokerName] = 0
		}
	}
	return out, nil
}

const permWrite = 2 // PermName.PERM_WRITE

type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
}

// queueData is the topic route's queue table; nil (and no error) when the name server knows no such topic.
func (c *Client) queueData(ctx context.Context, namesrv, topic string) ([]queueData, error) {
	resp, err := c.Call(ctx, namesrv, codeGetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case resSuccess:
	case resTopicNotExist:
		return nil, nil
	default:
		return nil, &CodeError{resp.Code, resp.Remark}
	}
	var route struct {
		QueueDatas []queueData `json:"queueDatas"`
	}
	if err := decodeFastJSON(resp.Body, &route); err != nil {
		return nil, fmt.Errorf("topic route: %v", err)
	}
	if route.QueueDatas == nil {
		route.QueueDatas = []queueData{}
	}
	return route.QueueDatas, nil
}

// CreateTopic creates (or updates) topic on the broker at addr with queues read and write queues.
func (c *Client) CreateTopic(ctx context.Context, addr, topic string, queues int) error {
	q := strconv.Itoa(queues)
	resp, err := c.Call(ctx, addr, codeCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": q, "writeQueueNums": q,
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil)
	if err != nil {
		return err
	}
	if resp.Code != resSuccess {
		return &CodeError{resp.Code, resp.Remark}
	}
	return nil
}

// BrokerVersion asks the broker at addr for its runtime information, which also tells that it answers,
// and returns the version it states, e.g. "RocketMQ V5_3_3"; "" when the answer names none.
func (c *Client) BrokerVersion(ctx context.Context, addr string) (string, error) {
	resp, err := c.Call(ctx, addr, codeGetBrokerRuntimeInfo, nil, nil)
	if err != nil {
		return "", err
	}
	if resp.Code != resSuccess {
		return "", &CodeError{resp.Code, resp.Remark}
	}
	var info struct {
		Table map[string]string `json:"table"`
	}
	if decodeFastJSON(resp.Body, &info) != nil || info.Table["brokerVersionDesc"] == "" {
		return "", nil // the broker answered: it is up, whatever its answer's shape
	}
	return "RocketMQ " + info.Table["brokerVersionDesc"], nil
}

// MaxOffset returns the number of messages ever written to one queue (its max logical offset).
func (c *Client) MaxOffset(ctx context.Context, addr, topic string, queue int) (int64, error) {
	resp, err := c.Call(ctx, addr, codeGetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(queue)}, nil)
	if err != nil {
		return 0, err
	}
	if resp.Code != resSuccess {
		return 0, &CodeError{resp.Code, resp.Remark}
	}
	return strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
}

// Pull reads up to max messages of one queue from offset, without committing anything, and returns
// them with the offset to continue from; none (and no error) when the queue has nothing at offset.
func (c *Client) Pull(ctx context.Context, addr, group, topic string, queue int, offset int64, max int) (msgs []*primitive.MessageExt, next int64, err error) {
	resp, err := c.Call(ctx, addr, codePullMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queue),
		"queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": strconv.Itoa(max),
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": "*", "subVersion": "0", "expressionType": "TAG",
	}, nil)
	if err != nil {
		return nil, offset, err
	}
	next = offset
	if s := resp.ExtFields["nextBeginOffset"]; s != "" {
		next, _ = strconv.ParseInt(s, 10, 64)
	}
	switch resp.Code {
	case resSuccess:
		msgs, err := decodePulled(resp.Body, topic, queue, offset)
		if err != nil {
			return nil, offset, err
		}
		return msgs, next, nil
	case resPullNotFound, resPullRetry, resPullOffsetMove:
		return nil, next, nil
	default:
		return nil, offset, &CodeError{resp.Code, resp.Remark}
	}
}

// decodePulled decodes the messages of a pull answer for topic's queue from offset. The records are
// checked first (primitive.DecodeMessage trusts every length: a negative one panics or loops for
// long), then every message must be of that topic and queue, at or after offset: anything else is no
// answer to this pull and is a protocol violation, nothing delivered.
func decodePulled(body []byte, topic string, queue int, offset int64) ([]*primitive.MessageExt, error) {
	if err := checkMessageRecords(body); err != nil {
		return nil, err
	}
	msgs := primitive.DecodeMessage(body)
	for _, m := range msgs {
		if m.Topic != topic || m.Queue == nil || m.Queue.QueueId != queue || m.QueueOffset < offset {
			qid := -1
			if m.Queue != nil {
				qid = m.Queue.QueueId
			}
			return nil, fmt.Errorf("%w: pull of %s queue %d from offset %d answered with a message of %q queue %d offset %d",
				ErrProtocol, topic, queue, offset, m.Topic, qid, m.QueueOffset)
		}
	}
	return msgs, nil
}

// checkMessageRecords walks the records of a pulled body as primitive.DecodeMessage reads them and checks
// that every length is within its record and every record's size is what it says.
func checkMessageRecords(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("%w: pulled messages: %s", ErrProtocol, what) }
	const (
		bornV6  = 1 << 4 // primitive.FlagBornHostV6
		storeV6 = 1 << 5 // primitive.FlagStoreHostV6
	)
	for len(b) > 0 {
		if len(b) < 4 {
			return bad("truncated record")
		}
		size := int64(int32(binary.BigEndian.Uint32(b)))
		if size < 4 || size > int64(len(b)) {
			return bad(fmt.Sprintf("record size %d of %d bytes left", size, len(b)))
		}
		r := b[:size]
		const fixedToSysFlag = 4 + 4 + 4 + 4 + 4 + 8 + 8 // size .. physical offset
		at := fixedToSysFlag
		need := func(n int) bool { return at+n <= len(r) }
		if !need(4) {
			return bad("record too short")
		}
		sysFlag := int32(binary.BigEndian.Uint32(r[at:]))
		at += 4 + 8 // sysFlag, born timestamp
		if sysFlag&bornV6 != 0 {
			at += 20
		} else {
			at += 8
		}
		at += 8 // store timestamp
		if sysFlag&storeV6 != 0 {
			at += 20
		} else {
			at += 8
		}
		at += 4 + 8 // reconsume times, prepared transaction offset
		if !need(4) {
			return bad("record too short")
		}
		bodyLen := int64(int32(binary.BigEndian.Uint32(r[at:])))
		at += 4
		if bodyLen < 0 || int64(at)+bodyLen > int64(len(r)) {
			return bad(fmt.Sprintf("body length %d", bodyLen))
		}
		at += int(bodyLen)
		if !need(1) {
			return bad("record too short")
		}
		at += 1 + int(r[at])
		if !need(2) {
			return bad("record too short")
		}
		propsLen := int(int16(binary.BigEndian.Uint16(r[at:])))
		at += 2
		if propsLen < 0 || at+propsLen != len(r) {
			return bad(fmt.Sprintf("properties length %d in a record of %d bytes", propsLen, len(r)))
		}
		b = b[size:]
	}
	return nil
}

// ErrNoBrokers: the name server knows no broker with a master.
var ErrNoBrokers = errors.New("the name server knows no broker")
