package nats_test

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// fakeAnswer is how the fake server answers a publish into JetStream: subject is where it was
// published, seq the message's number, reply the publish's reply subject. It returns the reply
// subject to answer on ("": none) and the answer's payload ("TWICE:" first: sent twice; "AHEAD:<to>
// <payload>\n" first: that answer sent before); store says
// whether the fake keeps the message.
type fakeAnswer func(subject string, seq int, reply string) (to, payload string, store bool)

// fakeServer speaks enough of the NATS client protocol (INFO, CONNECT, PING/PONG, SUB, PUB/HPUB, MSG)
// and of the JetStream API (stream info) for the publisher, answering publishes as answer says.
type fakeServer struct {
	ln     net.Listener
	answer fakeAnswer
	stream string
	// closeAfterPong closes each connection once it answered the handshake's PING; onSub runs when the
	// client subscribes its reply inbox (prefix without the '*'), with a way to send it a message.
	closeAfterPong bool
	onSub          func(prefix string, send func(to, payload string), stop <-chan struct{})
	atomic         bool // the stream allows atomic batches (the fake does not parse their headers)

	mu     sync.Mutex
	stored int
	bodies map[string]int
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startFake(t testing.TB, stream string, answer fakeAnswer, opts ...func(*fakeServer)) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln, answer: answer, stream: stream, bodies: map[string]int{}, atomic: true}
	for _, o := range opts {
		o(f)
	}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeServer) addr() string { return f.ln.Addr().String() }

func (f *fakeServer) storedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stored
}

func (f *fakeServer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.wg.Add(1)
		go func() { defer f.wg.Done(); f.serve(c) }()
	}
}

func (f *fakeServer) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeServer) serve(c net.Conn) {
	defer c.Close()
	stop := make(chan struct{})
	var flooders sync.WaitGroup
	defer func() { close(stop); flooders.Wait() }()
	var wmu sync.Mutex // the read loop and onSub write
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, "INFO {\"server_id\":\"FAKE\",\"server_name\":\"fake\",\"version\":\"2.15.2\",\"proto\":1,\"headers\":true,\"max_payload\":1048576,\"jetstream\":true}\r\n")
	w.Flush()
	r := bufio.NewReader(c)
	subs := map[string]string{} // sid by subject pattern
	seq := 0
	msg := func(to, payload string) { // under wmu
		sid := "1"
		for pat, s := range subs {
			if strings.HasPrefix(to, strings.TrimSuffix(pat, "*")) {
				sid = s
			}
		}
		fmt.Fprintf(w, "MSG %s %s %d\r\n%s\r\n", to, sid, len(payload), payload)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		wmu.Lock()
		switch strings.ToUpper(fields[0]) {
		case "PING":
			w.WriteString("PONG\r\n")
			if f.closeAfterPong {
				w.Flush()
				wmu.Unlock()
				return
			}
		case "SUB":
			subs[fields[1]] = fields[len(fields)-1]
			if f.onSub != nil && strings.HasPrefix(fields[1], "_INBOX.") {
				prefix := strings.TrimSuffix(fields[1], "*")
				send := func(to, payload string) {
					wmu.Lock()
					defer wmu.Unlock()
					msg(to, payload)
					w.Flush()
				}
				flooders.Add(1)
				go func() { defer flooders.Done(); f.onSub(prefix, send, stop) }()
			}
		case "PUB", "HPUB":
			subject, reply := fields[1], ""
			n, _ := strconv.Atoi(fields[len(fields)-1])
			hdr := 0
			if fields[0] == "HPUB" {
				hdr, _ = strconv.Atoi(fields[len(fields)-2])
			}
			if (fields[0] == "PUB" && len(fields) == 4) || (fields[0] == "HPUB" && len(fields) == 5) {
				reply = fields[2]
			}
			data := make([]byte, n+2)
			if _, err := io.ReadFull(r, data); err != nil {
				wmu.Unlock()
				return
			}
			body := string(data[hdr:n])
			switch {
			case strings.HasPrefix(subject, "$JS.API.STREAM.INFO."):
				name := strings.TrimPrefix(subject, "$JS.API.STREAM.INFO.")
				subj := f.stream
				if subj == "" { // any: the topic named like the stream
					subj = name
				}
				msg(reply, fmt.Sprintf(`{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":%q,"subjects":[%q],"allow_atomic":%v,"storage":"file"},"created":"2026-01-01T00:00:00Z","state":{"messages":0}}`, name, subj, f.atomic))
			case reply != "":
				seq++
				to, payload, store := f.answer(subject, seq, reply)
				if store {
					f.mu.Lock()
					f.stored++
					f.bodies[body]++
					f.mu.Unlock()
				}
				if ahead, ok := strings.CutPrefix(payload, "AHEAD:"); ok { // "AHEAD:<to> <payload>\n" first
					first, rest, _ := strings.Cut(ahead, "\n")
					aheadTo, aheadPayload, _ := strings.Cut(first, " ")
					msg(aheadTo, aheadPayload)
					payload = rest
				}
				if again, ok := strings.CutPrefix(payload, "TWICE:"); ok { // the answer sent twice
					msg(to, again)
					payload = again
				}
				if to != "" {
					msg(to, payload)
				}
			}
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
		wmu.Unlock()
	}
}

// fakeNATS is the fake server misbehaving as publishertest's misbehaviours say (publishertest.Fake).
type fakeNATS struct{ *fakeServer }

func (f fakeNATS) Addrs() []string { return []string{f.addr()} }
func (f fakeNATS) Stored() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.bodies)
}
func (f fakeNATS) Close() { f.close() }

// newFakeNATS makes the fake for m. Its stream takes any topic (its stream info names the topic asked
// about as the subject); its batches are not atomic (it answers each message).
func newFakeNATS(t testing.TB, m publishertest.Misbehaviour) publishertest.Fake {
	honest := func(s string, n int, r string) (string, string, bool) { return r, pubAck(s, n, ""), true }
	answer := honest
	var opts []func(*fakeServer)
	switch m {
	case publishertest.Garbage:
		answer = func(_ string, _ int, r string) (string, string, bool) { return r, "garbage", false }
	case publishertest.CloseAfterHandshake:
		opts = append(opts, func(f *fakeServer) { f.closeAfterPong = true })
	case publishertest.AheadOfHandshake:
		opts = append(opts, func(f *fakeServer) {
			f.onSub = func(prefix string, send func(string, string), _ <-chan struct{}) {
				send(prefix+"1_0", pubAck("x", 1, ""))
			}
		})
	case publishertest.Twice:
		answer = func(s string, n int, r string) (string, string, bool) { return r, "TWICE:" + pubAck(s, n, ""), true }
	case publishertest.AnswerAhead:
		answer = func(s string, n int, r string) (string, string, bool) {
			return r, "AHEAD:" + guessed(r, 1) + " " + pubAck(s, n+1, "") + "\n" + pubAck(s, n, ""), true
		}
	case publishertest.Flood:
		answer = func(string, int, string) (string, string, bool) { return "", "", false }
		opts = append(opts, func(f *fakeServer) {
			f.onSub = func(prefix string, send func(string, string), stop <-chan struct{}) {
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for i := 1; ; i++ {
					select {
					case <-stop:
						return
					case <-tick.C:
						send(prefix+strconv.Itoa(i)+"_0", pubAck("x", i, ""))
					}
				}
			}
		})
	case publishertest.StrayThenDrop:
		answer = func(s string, n int, r string) (string, string, bool) {
			if n%2 == 0 {
				return "", "", false
			}
			return r, "AHEAD:" + guessed(r, 1) + " " + pubAck(s, n+1, "") + "\n" + pubAck(s, n, ""), true
		}
	}
	opts = append(opts, func(f *fakeServer) { f.atomic = false })
	f := startFake(t, "", answer, opts...)
	return fakeNATS{f}
}
