package kafka_test

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// Misbehaviours of this file's own, beside publishertest's.
const (
	reject    pt.Misbehaviour = "answers with a non-retriable error code (CORRUPT_MESSAGE)"
	notLeader pt.Misbehaviour = "answers NOT_LEADER_OR_FOLLOWER forever"
	silent    pt.Misbehaviour = "never answers"
)

// fakeBroker is a one-broker Kafka cluster speaking just enough of the protocol for franz-go's
// producer: ApiVersions, Metadata (every topic exists, one partition it leads), CreateTopics (every topic
// exists already), InitProducerID, Produce.
// It behaves until armed; once armed, it misbehaves as m says on every connection made from then on,
// and on every produce request. (Kafka has no handshake beyond ApiVersions: a fake that misbehaved from
// the start would only show that New cannot discover such a cluster, which TestNewWithoutCluster does.)
type fakeBroker struct {
	t     testing.TB
	m     pt.Misbehaviour
	ln    net.Listener
	wg    sync.WaitGroup
	armed atomic.Bool
	done  chan struct{}
	once  sync.Once

	// refuse produce partitions with refuseCode this many more times (then store), armed or not
	refuse     atomic.Int32
	refuseCode int16

	// in a cluster (startFakeCluster): its node id and every broker of the cluster, in node order
	node  int32
	peers []*fakeBroker
	// lagging is how many more metadata answers say a named topic does not exist: a broker that has
	// not caught up with a topic just created elsewhere
	lagging atomic.Int32
	// denied, when set before the broker is used, is a topic its metadata answers with
	// TOPIC_AUTHORIZATION_FAILED (an ACL that refuses the user)
	denied string
	// advertised, when set, is the address its metadata names for it (a front that relays to it)
	advertised atomic.Pointer[string]
	// held, when set, holds every metadata answer that names a topic until it is closed: a topic
	// lookup that is slow while the connection is up
	held atomic.Pointer[chan struct{}]

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	stored map[string]int   // by body
	reqs   []map[string]int // records of each produce request stored, by topic, in order
}

func startFake(t testing.TB, m pt.Misbehaviour) *fakeBroker { return startFakeTLS(t, m, nil) }

// startFakeTLS starts a fake broker, serving TLS with tc when it is not nil.
func startFakeTLS(t testing.TB, m pt.Misbehaviour, tc *tls.Config) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	f := &fakeBroker{t: t, m: m, ln: ln, conns: map[net.Conn]struct{}{}, stored: map[string]int{}, done: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.Close)
	return f
}

// startFakeCluster starts n honest fake brokers that name each other in metadata: broker i has node id
// i and leads partition i of every topic.
func startFakeCluster(t testing.TB, n int) []*fakeBroker {
	t.Helper()
	fs := make([]*fakeBroker, n)
	for i := range fs {
		fs[i] = startFake(t, pt.Honest)
		fs[i].node = int32(i)
	}
	for _, f := range fs {
		f.peers = fs
	}
	return fs
}

func (f *fakeBroker) addr() string { return f.ln.Addr().String() }

// advertisedAddr is the address metadata names for f.
func (f *fakeBroker) advertisedAddr() string {
	if a := f.advertised.Load(); a != nil {
		return *a
	}
	return f.addr()
}

// hold holds f's metadata answers that name a topic until the function it returns is called (at the
// latest at cleanup).
func (f *fakeBroker) hold(t testing.TB) (release func()) {
	h := make(chan struct{})
	f.held.Store(&h)
	var once sync.Once
	release = func() { once.Do(func() { f.held.Store(nil); close(h) }) }
	t.Cleanup(release)
	return release
}

func (f *fakeBroker) Addrs() []string  { return []string{f.addr()} }
func (f *fakeBroker) arm()             { f.armed.Store(true) }
func (f *fakeBroker) misbehaves() bool { return f.m != pt.Honest && f.armed.Load() }

func (f *fakeBroker) Stored() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.stored)
}

func (f *fakeBroker) Close() {
	f.once.Do(func() {
		close(f.done)
		f.ln.Close()
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
	})
	f.wg.Wait()
}

func (f *fakeBroker) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = struct{}{}
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.Close()
			(&fakeConn{f: f, c: c, bad: f.misbehaves()}).serve()
		}()
	}
}

// fakeConn is one connection; bad: made while armed.
type fakeConn struct {
	f    *fakeBroker
	c    net.Conn
	bad  bool
	wmu  sync.Mutex
	last []byte // the last produce answer, whose correlation id guessed answers replace
	drop bool   // StrayThenDrop: the next produce is dropped
}

func (fc *fakeConn) write(b []byte) error {
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_, err := fc.c.Write(b)
	return err
}

// guessed is the last produce answer with correlation id corr.
func (fc *fakeConn) guessed(corr uint32) []byte {
	b := append([]byte(nil), fc.last...)
	binary.BigEndian.PutUint32(b[4:], corr)
	return b
}

func (fc *fakeConn) serve() {
	f := fc.f
	if fc.bad && f.m == pt.Flood {
		// guessed answers every millisecond, nothing else
		fc.last = frame(0, false, &kmsg.ProduceResponse{Version: 9})
		for i := uint32(1); ; i++ {
			select {
			case <-f.done:
				return
			case <-time.After(time.Millisecond):
			}
			if fc.write(fc.guessed(i)) != nil {
				return
			}
		}
	}
	r := bufio.NewReader(fc.c)
	for first := true; ; first = false {
		key, corr, req, ok := readRequest(f.t, r)
		if !ok {
			return
		}
		if fc.bad && f.m == pt.Garbage && key == kmsg.Produce.Int16() {
			if fc.write([]byte("\x00\x00\x00\x0c\x7f\xff\xff\xffgarbage!")) != nil {
				return
			}
			continue
		}
		resp, ok := fc.answer(req)
		if !ok {
			return // close
		}
		if resp == nil {
			continue // never answer
		}
		out := frame(corr, key != kmsg.ApiVersions.Int16(), resp)
		if key == kmsg.Produce.Int16() {
			fc.last = out
			switch {
			case fc.bad && f.m == pt.Twice:
				out = append(out, out...)
			case fc.bad && f.m == pt.AnswerAhead:
				for k := uint32(1); k <= 3; k++ {
					out = append(out, fc.guessed(corr+k)...)
				}
			case fc.bad && f.m == pt.StrayThenDrop:
				out = append(out, fc.guessed(corr+1)...)
				fc.drop = true
			}
		}
		if fc.write(out) != nil {
			return
		}
		if first && fc.bad && f.m == pt.AheadOfHandshake {
			// an answer to nothing, right after the connection's ApiVersions
			ahead := frame(corr+1, true, &kmsg.ProduceResponse{Version: 9})
			if fc.write(ahead) != nil {
				return
			}
		}
	}
}

// readRequest reads one request frame: its key, correlation id and decoded request.
func readRequest(t testing.TB, r *bufio.Reader) (int16, uint32, kmsg.Request, bool) {
	var size int32
	if err := binary.Read(r, binary.BigEndian, &size); err != nil || size < 10 || size > 64<<20 {
		return 0, 0, nil, false
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, 0, nil, false
	}
	key, version := int16(binary.BigEndian.Uint16(b)), int16(binary.BigEndian.Uint16(b[2:]))
	corr := binary.BigEndian.Uint32(b[4:])
	b = b[8:]
	if n := int16(binary.BigEndian.Uint16(b)); n > 0 { // client id
		b = b[2+int(n):]
	} else {
		b = b[2:]
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, 0, nil, false
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		b = b[1:] // franz-go sends no tagged fields in the header
	}
	if err := req.ReadFrom(b); err != nil {
		t.Logf("fake: request %d v%d: %v", key, version, err)
		return 0, 0, nil, false
	}
	return key, corr, req, true
}

// frame encodes resp as the answer with correlation id corr (flexHeader: the header's tagged fields,
// which ApiVersions answers never have).
func frame(corr uint32, flexHeader bool, resp kmsg.Response) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 4), corr)
	if resp.IsFlexible() && flexHeader {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// answer returns the response to req; nil: none; false: close the connection.
func (fc *fakeConn) answer(req kmsg.Request) (kmsg.Response, bool) {
	f := fc.f
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := resp.(type) {
	case *kmsg.ApiVersionsResponse:
		for _, k := range []struct{ key, min, max int16 }{
			{kmsg.ApiVersions.Int16(), 0, 3}, {kmsg.Metadata.Int16(), 1, 12}, {kmsg.Produce.Int16(), 3, 11}, {kmsg.InitProducerID.Int16(), 0, 4},
			{kmsg.CreateTopics.Int16(), 0, 4},
		} {
			v := kmsg.NewApiVersionsResponseApiKey()
			v.ApiKey, v.MinVersion, v.MaxVersion = k.key, k.min, k.max
			r.ApiKeys = append(r.ApiKeys, v)
		}
	case *kmsg.MetadataResponse:
		if h := f.held.Load(); h != nil && len(req.(*kmsg.MetadataRequest).Topics) > 0 {
			select {
			case <-*h:
			case <-f.done:
				return nil, false
			}
		}
		peers := f.peers
		if peers == nil {
			peers = []*fakeBroker{f}
		}
		for _, pf := range peers {
			host, portS, _ := net.SplitHostPort(pf.advertisedAddr())
			port, _ := strconv.Atoi(portS)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = pf.node, host, int32(port)
			r.Brokers = append(r.Brokers, b)
		}
		r.ControllerID = peers[0].node
		for _, rt := range req.(*kmsg.MetadataRequest).Topics {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = rt.Topic
			if rt.Topic != nil && *rt.Topic == f.denied && f.denied != "" {
				t.ErrorCode = kerr.TopicAuthorizationFailed.Code
				r.Topics = append(r.Topics, t)
				continue
			}
			if f.lagging.Load() > 0 && f.lagging.Add(-1) >= 0 {
				t.ErrorCode = kerr.UnknownTopicOrPartition.Code
				r.Topics = append(r.Topics, t)
				continue
			}
			for _, pf := range peers {
				p := kmsg.NewMetadataResponseTopicPartition()
				p.Partition, p.Leader, p.Replicas, p.ISR = pf.node, pf.node, []int32{pf.node}, []int32{pf.node}
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
		}
	case *kmsg.CreateTopicsResponse: // every topic exists
		for _, rt := range req.(*kmsg.CreateTopicsRequest).Topics {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode = rt.Topic, kerr.TopicAlreadyExists.Code
			r.Topics = append(r.Topics, t)
		}
	case *kmsg.InitProducerIDResponse:
		r.ProducerID = 1
	case *kmsg.ProduceResponse:
		bad := fc.bad || f.misbehaves()
		switch {
		case fc.drop:
			fc.drop = false
			return nil, true
		case bad && f.m == silent:
			return nil, true
		case bad && f.m == pt.CloseAfterHandshake:
			return nil, false
		}
		counts := map[string]int{}
		defer fc.countRequest(counts)
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition = rp.Partition
				switch {
				case f.refuse.Load() > 0 && f.refuse.Add(-1) >= 0:
					p.ErrorCode = f.refuseCode
				case bad && f.m == reject:
					p.ErrorCode = kerr.CorruptMessage.Code
				case bad && f.m == notLeader:
					p.ErrorCode = kerr.NotLeaderForPartition.Code
				default:
					var n int
					p.BaseOffset, n = fc.store(rp.Records)
					counts[rt.Topic] += n
				}
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
		}
	default:
		return nil, false
	}
	return resp, true
}

// countRequest notes the records a produce request stored, by topic.
func (fc *fakeConn) countRequest(counts map[string]int) {
	if len(counts) > 0 {
		fc.f.mu.Lock()
		fc.f.reqs = append(fc.f.reqs, counts)
		fc.f.mu.Unlock()
	}
}

// requests returns the records of topic in each produce request that held some.
func (f *fakeBroker) requests(topic string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, r := range f.reqs {
		if n := r[topic]; n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// store records the bodies of a record batch (uncompressed: the publisher compresses nothing) and
// returns the offset of its first and how many it held.
func (fc *fakeConn) store(records []byte) (int64, int) {
	f := fc.f
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(records); err != nil || batch.Attributes&7 != 0 {
		f.t.Errorf("fake: a record batch it cannot read (compression %d): %v", batch.Attributes&7, err)
		return 0, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	base := int64(len(f.stored))
	rs := batch.Records
	for range batch.NumRecords {
		l, n := binary.Varint(rs)
		if n <= 0 || int(l) > len(rs)-n {
			f.t.Errorf("fake: a record that does not fit its batch")
			return base, 0
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(rs[:n+int(l)]); err != nil {
			f.t.Errorf("fake: record: %v", err)
			return base, 0
		}
		f.stored[string(rec.Value)]++
		rs = rs[n+int(l):]
	}
	return base, int(batch.NumRecords)
}
