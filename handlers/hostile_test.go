package handlers_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/handlers"
)

// TestUnreadBodyAnsweredAtOnce: an answer given before the request body was read (an error, or a route
// that takes no body) goes out at once and closes the connection: no "100 Continue" inviting the body,
// no wait for the body to arrive (up to http.read_timeout, 10 s here). A body that was read keeps the
// connection alive.
func TestUnreadBodyAnsweredAtOnce(t *testing.T) {
	const readTimeout = 10 * time.Second
	ts := newServer(t, newFake(1), func(o *handlers.Options) { o.ReadTimeout = readTimeout })
	authed := newServer(t, newFake(1), func(o *handlers.Options) { o.ReadTimeout = readTimeout; o.AuthToken = "s3cret" })
	for _, tc := range []struct {
		name   string
		srv    *testServer
		req    string // headers; the body is never sent unless continue100 says so
		status int
		// continue100: the client sends the body after a "100 Continue" (then keepAlive is checked).
		continue100 bool
		keepAlive   bool
	}{
		{name: "Expect 100-continue, Content-Length over message.max_size", srv: ts, status: 413,
			req: "POST /send1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1001\r\n\r\n"},
		{name: "Expect 100-continue, bad query", srv: ts, status: 400,
			req: "POST /send1?sise=1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n"},
		{name: "Expect 100-continue, no token", srv: authed, status: 401,
			req: "POST /send1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n"},
		{name: "body not sent, no token", srv: authed, status: 401,
			req: "POST /send1 HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"},
		{name: "body not sent, bad query", srv: ts, status: 400,
			req: "POST /send1?topic=a%zz HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\nabc"},
		{name: "body not sent, unknown route", srv: ts, status: 404,
			req: "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"},
		{name: "body not sent, route without a body", srv: ts, status: 200,
			req: "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"},
		{name: "body sent and read", srv: ts, status: 200, keepAlive: true,
			req: "POST /send1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"},
		{name: "body sent and read, then refused", srv: authed, status: 400, keepAlive: true,
			req: "POST /send1?size=5 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Length: 3\r\n\r\nabc"},
		{name: "Expect 100-continue, body sent and read", srv: ts, status: 200, continue100: true, keepAlive: true,
			req: "POST /send1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.srv.srv)
			defer srv.Close()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * readTimeout))
			start := time.Now()
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if resp.StatusCode == http.StatusContinue {
				if !tc.continue100 {
					t.Fatalf("100 Continue: the client is invited to send a body that will not be read")
				}
				if _, err := io.WriteString(c, "abc"); err != nil {
					t.Fatal(err)
				}
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatalf("no answer after the body: %v", err)
				}
			} else if tc.continue100 {
				t.Fatalf("status %d, want 100 Continue first", resp.StatusCode)
			}
			body, _ := io.ReadAll(resp.Body)
			if took := time.Since(start); took > readTimeout/2 {
				t.Errorf("answered after %v: it waited for the body", took)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.keepAlive {
				if resp.Close {
					t.Error("connection closed after a body that was read")
				}
				return
			}
			if !resp.Close {
				t.Error(`answer without "Connection: close" though the body was not read`)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("connection still open after the answer (read: %v)", err)
			}
			if took := time.Since(start); took > readTimeout/2 {
				t.Errorf("connection closed after %v: it waited for the body", took)
			}
		})
	}
}

// TestEchoCut: error answers quote at most a few hundred bytes of the client's input, however large it
// is and however much escaping (a %22 is '"', escaped once by %q and again by JSON) would grow it.
func TestEchoCut(t *testing.T) {
	ts := newServer(t, newFake(1))
	big := strings.Repeat("%22", 20000)
	bigQuery := strings.Repeat("%22", 2600) // under the 8 KiB a query may have
	for _, tc := range []struct {
		name, method, target string
		status               int
		want                 string // in the error message
	}{
		{"path", http.MethodGet, "/" + strings.Repeat("p", 60000), 404, "bytes cut)"},
		{"escaped path", http.MethodGet, "/" + big, 404, "bytes cut)"},
		{"method", strings.Repeat("M", 60000), "/send1", 405, "bytes cut)"},
		{"parameter name", http.MethodGet, "/send1?" + strings.Repeat("n", 8000) + "=1", 400, "bytes cut)"},
		{"escaped parameter name", http.MethodGet, "/send1?" + bigQuery + "=1", 400, "bytes cut)"},
		{"topic", http.MethodGet, "/send1?topic=" + bigQuery, 400, "bytes cut)"},
		{"size", http.MethodGet, "/send1?size=" + bigQuery, 400, "bytes cut)"},
		{"mode", http.MethodGet, "/send2?mode=" + bigQuery, 400, "bytes cut)"},
		{"query over 8 KiB", http.MethodGet, "/send1?topic=" + big, 400, "at most 8192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ts.do(tc.method, tc.target, "")
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			m := strictJSON(t, w.Body.Bytes())
			if n := w.Body.Len(); n > 1536 { // a 400-byte message and a 200-byte field, each escaped twice at most
				t.Errorf("answer of %d bytes to %d bytes of input", n, len(tc.target)+len(tc.method))
			}
			if msg, _ := m["error"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
		})
	}
}

// blockingCollector holds every Collect until release is closed, counting those waiting.
type blockingCollector struct {
	release chan struct{}
	waiting chan struct{}
}

func (b *blockingCollector) Describe(chan<- *prometheus.Desc) {} // unchecked: describes nothing
func (b *blockingCollector) Collect(chan<- prometheus.Metric) {
	b.waiting <- struct{}{}
	<-b.release
}

// TestMetricsTurns: /metrics renders at most a few answers at once; a scrape that finds them all taken
// gets 503 with Retry-After within a second or so, instead of adding its encoder's memory to theirs,
// and scrapes succeed again once the turns are free.
func TestMetricsTurns(t *testing.T) {
	ts := newServer(t, newFake(1))
	bc := &blockingCollector{release: make(chan struct{}), waiting: make(chan struct{}, 100)}
	ts.reg.MustRegister(bc)
	const turns = 4 // handlers.maxScrapes
	held := make(chan int, turns)
	for range turns {
		go func() { held <- ts.do(http.MethodGet, "/metrics", "").Code }()
	}
	for range turns {
		select {
		case <-bc.waiting:
		case <-time.After(10 * time.Second):
			t.Fatal("scrapes did not start")
		}
	}
	refused := make(chan *httptest.ResponseRecorder, 1)
	go func() { refused <- ts.do(http.MethodGet, "/metrics", "") }()
	select {
	case w := <-refused:
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Errorf("scrape past the turns: %d, Retry-After %q, want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
		strictJSON(t, w.Body.Bytes())
	case <-bc.waiting:
		t.Error("a scrape past the turns was rendered")
	case <-time.After(10 * time.Second):
		t.Error("a scrape past the turns waited without an answer")
	}
	close(bc.release)
	for range turns {
		if code := <-held; code != http.StatusOK {
			t.Errorf("held scrape: %d", code)
		}
	}
	if w := ts.do(http.MethodGet, "/metrics", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "mqtarget_http_requests_in_flight") {
		t.Errorf("scrape after the turns were freed: %d", w.Code)
	}
}

// TestReadyzShared: /readyz requests that arrive while a round of pings runs share it, so a flood of
// probes (or of clients) costs each broker host one ping at a time, not one connection per request.
func TestReadyzShared(t *testing.T) {
	f := newFake(2)
	f.pingGate = make(chan struct{})
	ts := newServer(t, f)
	const probes = 20
	codes := make(chan int, probes)
	for range probes {
		go func() { codes <- ts.do(http.MethodGet, "/readyz", "").Code }()
	}
	waitFor(t, "the first round's pings", func() bool { return f.pingCount() >= 2 })
	// The other probes arrive while it runs; give them a moment to (wrongly) start rounds of their own.
	time.Sleep(100 * time.Millisecond)
	close(f.pingGate)
	for range probes {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("/readyz %d, want 200", code)
		}
	}
	if n := f.pingCount(); n > 2*2 { // a probe that came after the first round may run a second
		t.Errorf("%d pings for %d concurrent probes of 2 hosts, want one round (2)", n, probes)
	}
}
