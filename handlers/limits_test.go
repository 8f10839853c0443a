package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mqtarget/mqtarget/handlers"
)

// strictJSON fails unless body is valid UTF-8 and one JSON object: encoding/json alone would accept
// invalid UTF-8 (it replaces it), which stricter clients refuse.
func strictJSON(t *testing.T, body []byte) map[string]any {
	t.Helper()
	if !utf8.Valid(body) {
		t.Fatalf("reply is not valid UTF-8: %q", body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("reply %q is not JSON: %v", body, err)
	}
	return m
}

// TestInvalidUTF8Replies: paths and parameter names holding invalid UTF-8, raw or %-escaped, get error
// replies that parse.
func TestInvalidUTF8Replies(t *testing.T) {
	ts := newServer(t, newFake(1))
	for _, tc := range []struct {
		name, target string
		status       int
	}{
		{"escaped byte in path", "/%FF", 404},
		{"raw byte in path", "/send\xff", 404},
		{"truncated sequence in path", "/send1/%C3", 404},
		{"escaped byte in parameter name", "/send1?%FFsize=1", 400},
		{"raw byte in parameter name", "/send1?\xfe=1", 400},
		{"raw byte in value", "/send1?topic=a\xc0b", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ts.do(http.MethodGet, tc.target, "")
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %q", w.Code, tc.status, w.Body)
			}
			if m := strictJSON(t, w.Body.Bytes()); m["error"] == "" {
				t.Errorf("no error in %v", m)
			}
		})
	}
	if c := ts.pub.Calls(); len(c) != 0 {
		t.Errorf("fake got %v", summarize(c))
	}
}

// TestMaxRequests: past http.max_requests send requests in their handlers, a send request is refused at
// once with 503, Retry-After and a JSON error naming the setting; health checks are not limited.
func TestMaxRequests(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	ts := newServer(t, f, func(o *handlers.Options) { o.MaxRequests = 2 })
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- ts.do(http.MethodGet, "/send1", "").Code }()
	}
	waitFor(t, "2 publishes held", func() bool { return len(f.Calls()) == 2 })

	w := ts.do(http.MethodGet, "/send2", "")
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", w.Code, w.Body)
	}
	if ra := w.Header().Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if r := decode(t, w); field(r) != "http.max_requests" || r.Error == "" {
		t.Errorf("reply %s, want an error naming http.max_requests", w.Body)
	}
	if w := ts.do(http.MethodGet, "/healthz", ""); w.Code != http.StatusOK {
		t.Errorf("/healthz at the limit: %d", w.Code)
	}
	close(f.gate)
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("held request: status %d", code)
		}
	}
	if n := len(f.Calls()); n != 2 {
		t.Errorf("fake got %d calls, want 2 (the refused request must not publish)", n)
	}
	// The slots are given back.
	if w := ts.do(http.MethodGet, "/send1", ""); w.Code != http.StatusOK {
		t.Errorf("after the limit: status %d: %s", w.Code, w.Body)
	}
}

// codeCount is the number of mqtarget_http_request_duration_seconds observations for route and code
// (0 before the first request is recorded).
func codeCount(t *testing.T, ts *testServer, route, code string) uint64 {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "mqtarget_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := labels(m); l["route"] == route && l["code"] == code {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// serveCancellable serves a GET in the background; hangUp cancels its context as a client hanging up
// does, and done is closed when the handler has returned.
func (ts *testServer) serveCancellable(target string) (w *httptest.ResponseRecorder, hangUp func(), done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	w = httptest.NewRecorder()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ts.srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil).WithContext(ctx))
	}()
	return w, cancel, finished
}

// TestClientGone: a client that hangs up while its publish is with the broker does not cancel the
// publish (it finishes under publish_timeout), and the request is recorded as 499, not as a 5xx.
func TestClientGone(t *testing.T) {
	for _, tc := range []struct {
		name, target, route string
		publishes           int
	}{
		{"send1", "/send1", "/send1", 1},
		{"send2 batch", "/send2", "/send2", 1},
		{"send2 sequential", "/send2?mode=sequential", "/send2", 2},
		{"send2Topic", "/send2Topic", "/send2Topic", 2},
		{"send3Host", "/send3Host", "/send3Host", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(3)
			f.gate = make(chan struct{})
			ts := newServer(t, f)
			w, hangUp, done := ts.serveCancellable(tc.target)
			waitFor(t, "publish held", func() bool { return len(f.Calls()) >= 1 })
			hangUp()
			close(f.gate) // the broker answers after the client left
			<-done
			if errs := f.contextErrors(); len(errs) != tc.publishes {
				t.Errorf("%d publishes finished, want %d", len(errs), tc.publishes)
			} else {
				for _, err := range errs {
					if err != nil {
						t.Errorf("publish context ended with %v: the client's hang-up reached the broker client", err)
					}
				}
			}
			if w.Code != handlers.StatusClientClosedRequest {
				t.Errorf("status %d, want 499: %s", w.Code, w.Body)
			}
			if n := codeCount(t, ts, tc.route, "499"); n != 1 {
				t.Errorf("%d observations with code 499, want 1", n)
			}
		})
	}
	t.Run("sendAsyncWait", func(t *testing.T) {
		f := newFake(1)
		f.async = asyncHold
		ts := newServer(t, f)
		w, hangUp, done := ts.serveCancellable("/sendAsyncWait")
		waitFor(t, "async publish held", func() bool { return f.heldCount() == 1 })
		hangUp()
		<-done // answers without waiting for the broker or publish_timeout
		if w.Code != handlers.StatusClientClosedRequest {
			t.Errorf("status %d, want 499: %s", w.Code, w.Body)
		}
		if n := codeCount(t, ts, "/sendAsyncWait", "499"); n != 1 {
			t.Errorf("%d observations with code 499, want 1", n)
		}
		f.release(nil)
		waitFor(t, "async completion counted", func() bool { return asyncCount(t, ts.reg, "acked") == 1 })
	})
}

// TestClientGoneOverTCP: a client closing its connection while its publish is held is recorded as 499,
// through net/http's own detection of the hang-up, and the publish still completes.
func TestClientGoneOverTCP(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	ts := newServer(t, f)
	// net/http cancels the request's context when it notices the close; only then may the broker answer.
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		context.AfterFunc(r.Context(), func() { close(gone) })
		ts.srv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /send1 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "publish held", func() bool { return len(f.Calls()) == 1 })
	c.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("net/http did not notice the hang-up")
	}
	close(f.gate)
	waitFor(t, "request recorded", func() bool { return codeCount(t, ts, "/send1", "499") == 1 })
	if errs := f.contextErrors(); len(errs) != 1 || errs[0] != nil {
		t.Errorf("publish context errors %v, want one nil", errs)
	}
}

// rawExchange writes req on a fresh connection to addr and reads one response; the connection's reader is
// returned for further checks.
func rawExchange(t *testing.T, addr, req string) (*http.Response, []byte, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Far above the read timeout under test: without the bound the server never answers.
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, body, br
}

// TestReadTimeout: a body that does not arrive within the read timeout is cut: a POST that reads it gets
// 408, a GET that does not read it still gets its answer, and both connections are closed. A slow
// publish after a complete body is not mistaken for a client that left.
func TestReadTimeout(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	f := newFake(1)
	ts := newServer(t, f, func(o *handlers.Options) { o.ReadTimeout = readTimeout })
	srv := httptest.NewServer(ts.srv)
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"POST body shorter than its Content-Length", "POST /send1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", 408},
		{"GET with a Content-Length and no body", "GET /send1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, br := rawExchange(t, addr, tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			m := strictJSON(t, body)
			if tc.status == 408 && m["field"] != "body" {
				t.Errorf("reply %s, want field body", body)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("connection still open after the answer (read: %v)", err)
			}
		})
	}

	t.Run("slow publish after a complete body", func(t *testing.T) {
		f.gate = make(chan struct{})
		go func() {
			// The publish outlasts the read timeout: the handler's context must survive it.
			time.Sleep(3 * readTimeout)
			close(f.gate)
		}()
		resp, body, _ := rawExchange(t, addr, "POST /send1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", resp.StatusCode, body)
		}
		if n := codeCount(t, ts, "/send1", "499"); n != 0 {
			t.Errorf("%d requests recorded as 499", n)
		}
	})
}

// TestLameDuck: after EnterLameDuck, /readyz answers 503 and every answer asks to close the connection.
func TestLameDuck(t *testing.T) {
	ts := newServer(t, newFake(1))
	if w := ts.do(http.MethodGet, "/readyz", ""); w.Code != http.StatusOK || w.Header().Get("Connection") != "" {
		t.Fatalf("before: /readyz %d, Connection %q", w.Code, w.Header().Get("Connection"))
	}
	ts.srv.EnterLameDuck()
	w := ts.do(http.MethodGet, "/readyz", "")
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d, want 503", w.Code)
	}
	if m := strictJSON(t, w.Body.Bytes()); m["ready"] != false {
		t.Errorf("/readyz %s", w.Body)
	}
	for _, target := range []string{"/readyz", "/healthz", "/send1", "/nope"} {
		if w := ts.do(http.MethodGet, target, ""); w.Header().Get("Connection") != "close" {
			t.Errorf("%s: Connection %q, want close", target, w.Header().Get("Connection"))
		}
	}
	if w := ts.do(http.MethodGet, "/send1", ""); w.Code != http.StatusOK {
		t.Errorf("/send1 during the lame-duck phase: %d", w.Code)
	}
}

// TestLameDuckDuringHandler: a request in its handler when the lame-duck phase begins is answered with
// "Connection: close" too; answered keep-alive, its connection would sit idle into the shutdown, whose
// close of idle connections resets the next request its client sends.
func TestLameDuckDuringHandler(t *testing.T) {
	pub := newFake(1)
	pub.gate = make(chan struct{})
	ts := newServer(t, pub)
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() { answered <- ts.do(http.MethodGet, "/send1", "") }()
	waitFor(t, "the publish at the gate", func() bool { pub.mu.Lock(); defer pub.mu.Unlock(); return len(pub.calls) > 0 })
	ts.srv.EnterLameDuck()
	close(pub.gate)
	w := <-answered
	if w.Code != http.StatusOK || w.Header().Get("Connection") != "close" {
		t.Errorf("/send1 begun before the lame duck: %d, Connection %q, want 200 and close", w.Code, w.Header().Get("Connection"))
	}
}
