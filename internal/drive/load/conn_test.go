package load

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawTarget serves HTTP/1.1 by hand so a case can answer in ways net/http's server never would: each
// request read (by net/http's parser) is counted and answered by answer, which writes raw bytes and
// says whether the connection stays open.
type rawTarget struct {
	ln       net.Listener
	wg       sync.WaitGroup
	requests atomic.Int64
	conns    atomic.Int64
	bodies   sync.Map // body text → count
}

func newRawTarget(t *testing.T, answer func(w io.Writer, n int64, r *http.Request) (keep bool)) *rawTarget {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt := &rawTarget{ln: ln}
	rt.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			rt.conns.Add(1)
			rt.wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(r.Body)
					v, _ := rt.bodies.LoadOrStore(string(b), new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
					if !answer(c, rt.requests.Add(1), r) {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); rt.wg.Wait() })
	return rt
}

func (rt *rawTarget) url() string { return "http://" + rt.ln.Addr().String() + "/send1?size=3" }

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// TestWireAnswers: the generator's own client reads every framing net/http's client reads, counts
// exactly what the target answered, and fails a request (never the generator) for a hostile answer.
func TestWireAnswers(t *testing.T) {
	cases := []struct {
		name   string
		answer func(w io.Writer, n int64, r *http.Request) bool
		method string
		// want: every request answered with this status; 0: every request is a transport error
		// containing errWant.
		want    int
		errWant string
		// connsPerRequest: the target closes after each answer, so each request has its own connection.
		connsPerRequest bool
	}{
		{name: "content-length", want: 200, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, okAnswer)
			return true
		}},
		{name: "chunked", want: 200, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
			return true
		}},
		{name: "head has no body", method: http.MethodHead, want: 200, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
			return true
		}},
		{name: "informational answers skipped", want: 201, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
			return true
		}},
		{name: "connection close: a new connection each", want: 200, connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
			return false
		}},
		{name: "body until close", want: 200, connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\n\r\nall of this until the close")
			return false
		}},
		{name: "http/1.0 answer", want: 200, connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return false
		}},
		{name: "cut mid-body", errWant: "reading the answer", connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
			return false
		}},
		{name: "cut mid-head", errWant: "malformed MIME header", connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Le")
			return false
		}},
		{name: "garbage", errWant: "malformed HTTP", connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
			return false
		}},
		{name: "endless head", errWant: "exceeds 1 MiB", connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			io.WriteString(w, "HTTP/1.1 200 OK\r\n")
			line := "X-Flood: " + strings.Repeat("y", 1000) + "\r\n"
			for range 3000 { // 3 MB of headers
				if _, err := io.WriteString(w, line); err != nil {
					break
				}
			}
			return false
		}},
		{name: "informational flood", errWant: "informational", connsPerRequest: true, answer: func(w io.Writer, _ int64, _ *http.Request) bool {
			for range 50 {
				io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\n")
			}
			return false
		}},
	}
	for _, c := range cases {
		for _, model := range []string{Closed, Open} {
			t.Run(c.name+"/"+model, func(t *testing.T) { testWireAnswer(t, model, c.answer, c.method, c.want, c.errWant, c.connsPerRequest) })
		}
	}
}

func testWireAnswer(t *testing.T, model string, answer func(w io.Writer, n int64, r *http.Request) bool, method string,
	want int, errWant string, connsPerRequest bool,
) {
	rt := newRawTarget(t, answer)
	o := Options{URL: rt.url(), Method: method, Connections: 2, Duration: 150 * time.Millisecond}
	// Keep-alive: the closed model's 2 workers keep their 2 connections; the open model starts a worker
	// whenever none is idle, but reuses them.
	reused := func(conns, served int64) bool { return conns <= 2 }
	// Closed each time: one connection per request; the open model's workers connect again right after
	// a close, ahead of their next request, so it may have one more per worker.
	closedEach := func(conns, served int64) bool { return conns == served }
	if model == Open {
		o.Connections, o.Rate = 0, 500
		// (How many it needs depends on how fast answers come: on a machine busy enough, nearly one per
		// request. Never reusing one is the defect.)
		reused = func(conns, served int64) bool { return conns < served }
		closedEach = func(conns, served int64) bool { return conns >= served && conns <= 2*served }
	}
	{
		{
			r, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			served := rt.requests.Load()
			if r.Requests == 0 || r.Requests != served {
				t.Fatalf("requests %d, the target read %d", r.Requests, served)
			}
			if want != 0 {
				if r.ByStatus[statusKey(want)] != r.Requests || r.Errors != 0 {
					t.Errorf("by status %v, errors %v; want every request %d", r.ByStatus, r.ErrorKinds, want)
				}
			} else {
				if r.Errors != r.Requests || len(r.ErrorKinds) == 0 {
					t.Fatalf("errors %d of %d requests, by status %v", r.Errors, r.Requests, r.ByStatus)
				}
				for kind := range r.ErrorKinds {
					if !strings.Contains(kind, errWant) {
						t.Errorf("error kind %q, want one naming %q", kind, errWant)
					}
				}
			}
			if conns := rt.conns.Load(); connsPerRequest && !closedEach(conns, served) || !connsPerRequest && !reused(conns, served) {
				t.Errorf("%d connections for %d requests", conns, served)
			}
		}
	}
}

func statusKey(code int) string { return strconv.Itoa(code) }

// TestWireRequest: the request the target reads is the one asked for: method, path and query, Host, a
// POST's body with its length, basic auth from the URL; nothing else a proxy or net/http would add.
func TestWireRequest(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	rt := newRawTarget(t, func(w io.Writer, _ int64, r *http.Request) bool {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		io.WriteString(w, okAnswer)
		return true
	})
	u := "http://user:p%40ss@" + rt.ln.Addr().String() + "/send2?size=3&topic=t"
	r, err := Run(context.Background(), Options{URL: u, Method: http.MethodPost, Body: []byte("abc"), Connections: 1, Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if r.OK == 0 || r.OK != int64(len(got)) {
		t.Fatalf("ok %d, the target read %d", r.OK, len(got))
	}
	q := got[0]
	user, pass, _ := q.BasicAuth()
	if q.Method != http.MethodPost || q.RequestURI != "/send2?size=3&topic=t" || q.Host != rt.ln.Addr().String() ||
		q.ContentLength != 3 || user != "user" || pass != "p@ss" || q.UserAgent() != "mqtarget-load" {
		t.Errorf("request %s %s host %q length %d auth %q:%q agent %q", q.Method, q.RequestURI, q.Host, q.ContentLength, user, pass, q.UserAgent())
	}
	if v, _ := rt.bodies.Load("abc"); v == nil || v.(*atomic.Int64).Load() != int64(len(got)) {
		t.Errorf("bodies %v: want every request's body to be abc", v)
	}
}

// TestIdleClosedConnectionReplaced: a target closing idle connections after 10 ms while the open model
// sends 10 per second on one worker. Each request would find its connection closed; it is checked
// before use and replaced, so no request fails, and none is sent twice (the generator never resends).
// The 90 ms between the close and the next request leave room for a busy machine's late timers: a
// close that comes only as the request is sent is the keep-alive race every client can lose (a CI
// run lost it with 20 per second and 20 ms).
func TestIdleClosedConnectionReplaced(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			var n, conns atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
			srv.Config.IdleTimeout = 10 * time.Millisecond
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			r, err := Run(context.Background(), Options{URL: srv.URL, Method: method, Rate: 10, MaxWorkers: 1, Duration: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests != 10 || r.OK != r.Requests || r.Errors != 0 || n.Load() != r.Requests {
				t.Errorf("requests %d, ok %d, errors %v, the target served %d", r.Requests, r.OK, r.ErrorKinds, n.Load())
			}
			if conns.Load() < 5 {
				t.Errorf("%d connections: the target's idle close did not happen, the case tests nothing", conns.Load())
			}
		})
	}
}

// TestAnswerAheadEndsConnection: a target that sends a second answer nobody asked for after each one.
// The generator must not take it for the next request's answer: the connection is dropped, and every
// request is answered by a read of its own.
func TestAnswerAheadEndsConnection(t *testing.T) {
	rt := newRawTarget(t, func(w io.Writer, n int64, _ *http.Request) bool {
		io.WriteString(w, okAnswer+"HTTP/1.1 299 Ahead\r\nContent-Length: 0\r\n\r\n")
		return true
	})
	for _, o := range []Options{{Connections: 1}, {Rate: 500}} {
		before := rt.requests.Load()
		o.URL, o.Duration = rt.url(), 100*time.Millisecond
		r, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if read := rt.requests.Load() - before; r.Requests == 0 || r.ByStatus["200"] != r.Requests || r.ByStatus["299"] != 0 || read != r.Requests {
			t.Errorf("%s model: by status %v of %d requests (target read %d), errors %v", o.Model(), r.ByStatus, r.Requests, read, r.ErrorKinds)
		}
	}
}

// TestEarlyAnswerToLargeBody: a target that answers 413 after the head of a 1 MiB POST and closes
// without reading the body (as mqtarget does for an oversize Content-Length). The write then fails
// after the answer came, on a goroutine of its own in the open model: each request still counts once,
// as the 413 or as the failed write, and the schedule goes on.
func TestEarlyAnswerToLargeBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				accepted.Add(1)
				io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")
			})
		}
	})
	for _, o := range []Options{{Connections: 2, Duration: 200 * time.Millisecond}, {Rate: 50, Duration: 300 * time.Millisecond}} {
		before := accepted.Load()
		o.URL, o.Method, o.Body = "http://"+ln.Addr().String()+"/send1", http.MethodPost, make([]byte, 1<<20)
		r, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		got := accepted.Load() - before
		if r.Requests == 0 || r.ByStatus["413"]+r.Errors != r.Requests || r.Requests != got || o.Rate > 0 && (r.Requests != 15 || r.NotSent != 0) {
			t.Errorf("%s model: %d requests (413: %d, errors %v), the target took %d heads, not sent %d",
				o.Model(), r.Requests, r.ByStatus["413"], r.ErrorKinds, got, r.NotSent)
		}
	}
}

// TestOpenModelNewConnections: every answer closes its connection, so in the open model every request
// goes on a new one, which the pacer connects and starts writing itself when the target is an IP
// address (open_linux.go), and a new worker dials when it is a name. The target must read each whole
// request exactly once: a large body's rest is written by the worker after the pacer's first write.
func TestOpenModelNewConnections(t *testing.T) {
	small, large := []byte("abc"), []byte(strings.Repeat("0123456789abcdef", 6<<10)) // 96 KiB > inlineWriteMax
	for _, tc := range []struct {
		name string
		host string // "" the listener's IP address
		body []byte
	}{
		{"ip small body", "", small},
		{"ip large body", "", large},
		{"name small body", "localhost", small},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRawTarget(t, func(w io.Writer, _ int64, _ *http.Request) bool {
				io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
				return false
			})
			addr := rt.ln.Addr().String()
			if tc.host != "" {
				_, port, _ := net.SplitHostPort(addr)
				addr = net.JoinHostPort(tc.host, port)
			}
			r, err := Run(context.Background(), Options{URL: "http://" + addr + "/send1", Method: http.MethodPost, Body: tc.body, Rate: 200, Duration: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests != 60 || r.OK != 60 || r.NotSent != 0 {
				t.Errorf("requests %d, ok %d, not sent %d: want 60, 60, 0 (errors %v)", r.Requests, r.OK, r.NotSent, r.ErrorKinds)
			}
			v, _ := rt.bodies.Load(string(tc.body))
			if n := rt.requests.Load(); v == nil || v.(*atomic.Int64).Load() != n || n != r.OK {
				t.Errorf("the target read %d requests, %v of them with the whole body; want %d each", n, v, r.OK)
			}
		})
	}
}

// TestHeadCutAtTheBound: an answer's head past maxHeadBytes is counted as too large wherever the bound
// cuts it, within a header's name too: bufio hands the parser the cut line ("X-Flo") before the read's
// error, which read as a malformed header once in a CI run (TestWireAnswers' "endless head", whose
// cut falls where TCP's segments do). net.Pipe ends each read where the target's write ends, so the
// bound falls exactly where each case puts it.
func TestHeadCutAtTheBound(t *testing.T) {
	line := "X-Flood: " + strings.Repeat("y", 1000) + "\r\n"
	for _, cut := range []int{0, 3, 5, 9, 500} { // bytes of the cut line before the bound
		t.Run(strconv.Itoa(cut), func(t *testing.T) {
			client, target := net.Pipe()
			defer client.Close()
			defer target.Close()
			head := []byte("HTTP/1.1 200 OK\r\n")
			for len(head)+2*len(line) <= maxHeadBytes-cut {
				head = append(head, line...)
			}
			pad := maxHeadBytes - cut - len(head) - len("X-Pad: \r\n") // a last whole line ends where the cut line starts
			head = append(head, "X-Pad: "+strings.Repeat("p", pad)+"\r\n"...)
			head = append(head, line[:cut]...)
			if len(head) != maxHeadBytes {
				t.Fatalf("head of %d bytes, want %d", len(head), maxHeadBytes)
			}
			go func() {
				if _, err := target.Write(head); err == nil {
					_, _ = target.Write([]byte(line[cut:] + line + "\r\n")) // never read: the bound ends the read first
				}
			}()
			u, _ := url.Parse("http://127.0.0.1:1/send1")
			w := newWire(u, http.MethodGet, nil, 5*time.Second)
			c := &conn{}
			c.use(client, nil)
			c.r.limit = maxHeadBytes
			resp, err := w.read(c)
			a := w.finish(c, resp, err, func(int) bool { return false })
			if a.err != errHeadTooLarge.Error() {
				t.Errorf("answer %+v, want the error %q", a, errHeadTooLarge)
			}
		})
	}
}
