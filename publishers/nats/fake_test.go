package nats_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
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

	mu     sync.Mutex
	stored int
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startFake(t testing.TB, stream string, answer fakeAnswer) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln, answer: answer, stream: stream}
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
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, "INFO {\"server_id\":\"FAKE\",\"server_name\":\"fake\",\"version\":\"2.15.2\",\"proto\":1,\"headers\":true,\"max_payload\":1048576,\"jetstream\":true}\r\n")
	w.Flush()
	r := bufio.NewReader(c)
	subs := map[string]string{} // sid by subject pattern prefix (the reply inbox, "X.*")
	seq := 0
	msg := func(to, payload string) {
		sid := ""
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
		switch strings.ToUpper(fields[0]) {
		case "PING":
			w.WriteString("PONG\r\n")
		case "SUB":
			subs[fields[1]] = fields[len(fields)-1]
		case "PUB", "HPUB":
			subject, reply := fields[1], ""
			n, _ := strconv.Atoi(fields[len(fields)-1])
			if (fields[0] == "PUB" && len(fields) == 4) || (fields[0] == "HPUB" && len(fields) == 5) {
				reply = fields[2]
			}
			if _, err := io.CopyN(io.Discard, r, int64(n)+2); err != nil {
				return
			}
			switch {
			case strings.HasPrefix(subject, "$JS.API.STREAM.INFO."):
				name := strings.TrimPrefix(subject, "$JS.API.STREAM.INFO.")
				msg(reply, fmt.Sprintf(`{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":%q,"subjects":[%q],"allow_atomic":true,"storage":"file"},"created":"2026-01-01T00:00:00Z","state":{"messages":0}}`, name, f.stream))
			case reply != "":
				seq++
				to, payload, store := f.answer(subject, seq, reply)
				if store {
					f.mu.Lock()
					f.stored++
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
	}
}

// stallProxy forwards TCP to a target until stalled: then it forwards nothing (a frozen server: the
// bytes wait in the socket buffers), until thawed.
type stallProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	thaw    *sync.Cond
	conns   []net.Conn
	wg      sync.WaitGroup
}

func startProxy(t testing.TB, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	p.thaw = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) stall(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.mu.Unlock()
	p.thaw.Broadcast()
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *stallProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.stalled {
			p.thaw.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) close() {
	p.stall(false)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
