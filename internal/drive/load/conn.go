package load

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// The generator's own HTTP/1.1 client. Every run sends one request, over and over, so the request is
// formatted once and each connection belongs to one goroutine that writes it and reads the answer,
// as wrk's connections do. net/http's client costs several times more per request (its connection
// pool with its locks, two goroutines and channels per connection, a request and header map built per
// request): at 10 000 requests/s on two cores that cost was most of the generator's 89 µs of CPU per
// request, and it showed as lag. Answers are parsed by net/http's own parser (http.ReadResponse), so
// framing (chunked, Content-Length, read-until-close, HEAD, 1xx) is what net/http does.

const (
	// maxHeadBytes bounds one answer's status line and headers (net/http's client allows 10 MB; a
	// load generator needs far less): a target sending endless headers fails the request instead of
	// growing the generator's memory.
	maxHeadBytes = 1 << 20
	// maxInformational 1xx answers are skipped before a request fails.
	maxInformational = 8
	readBufBytes     = 16 << 10
)

// wire sends the run's one request.
type wire struct {
	addr    string      // host:port dialled
	tls     *tls.Config // nil: plain HTTP
	request []byte      // the request as written: head and body
	parse   *http.Request
	timeout time.Duration
	dialer  net.Dialer
	direct  directAddr // where the open model's pacer may connect by itself (open_linux.go)
}

func newWire(u *url.URL, method string, body []byte, timeout time.Duration) *wire {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	w := &wire{addr: net.JoinHostPort(host, port), timeout: timeout,
		dialer: net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second},
		parse:  &http.Request{Method: method, URL: u}}
	if u.Scheme == "https" {
		w.tls = &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	}
	w.direct = newDirectAddr(host, port, w.tls == nil)
	b := fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: mqtarget-load\r\n", method, u.RequestURI(), u.Host)
	if u.User != nil { // as net/http: credentials in the URL are sent as basic auth
		r := &http.Request{Header: http.Header{}}
		pw, _ := u.User.Password()
		r.SetBasicAuth(u.User.Username(), pw)
		b = fmt.Appendf(b, "Authorization: %s\r\n", r.Header.Get("Authorization"))
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut {
		b = fmt.Appendf(b, "Content-Length: %d\r\n", len(body))
	}
	b = append(b, "\r\n"...)
	w.request = append(b, body...)
	return w
}

// conn is one connection, used by one goroutine at a time; its zero value is not connected yet.
type conn struct {
	nc   net.Conn
	raw  syscall.Conn // the TCP connection under nc, for alive
	r    countingReader
	br   *bufio.Reader
	idle time.Time // when the last answer was read
	// resp and body are the last simple answer's (head.go), reused: one request at a time.
	resp http.Response
	body fixedBody
}

// countingReader reads from the connection, counting what it read since the last reset, and fails once
// limit (when > 0) is passed.
type countingReader struct {
	nc    net.Conn
	n     int64
	limit int64
}

var errHeadTooLarge = errors.New("answer's head exceeds 1 MiB")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.limit > 0 && c.n >= c.limit {
		return 0, errHeadTooLarge
	}
	n, err := c.nc.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *conn) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

// answer is what one request got: an HTTP status, or a transport error (code 0) with its kind, and
// the beginning of a non-2xx body when want asked for it.
type answer struct {
	code   int
	err    string
	sample string
}

// do sends the request on c (connecting it first when needed) and reads the whole answer; want says
// whether a status's body should be sampled. A request is sent once: a failure is counted, never
// retried, since the target may have acted on it (a second /send1 is a second message).
func (w *wire) do(c *conn, want func(code int) bool) answer {
	deadline := time.Now().Add(w.timeout)
	switch {
	case c.nc == nil:
	case c.br.Buffered() > 0:
		c.close() // the target sent more than the last answer: bytes ahead answer nothing of ours
	case time.Since(c.idle) > idleCheck && !c.alive():
		c.close() // closed by the target while idle: a new connection, as net/http's pool would give
	}
	if c.nc == nil {
		if err := w.connect(c, deadline); err != nil {
			return answer{err: errorKind(err)}
		}
	}
	_ = c.nc.SetDeadline(deadline)
	c.r.n, c.r.limit = 0, maxHeadBytes
	if _, err := c.nc.Write(w.request); err != nil {
		c.close()
		return answer{err: "writing the request: " + errorKind(err)}
	}
	resp, err := w.read(c)
	return w.finish(c, resp, err, want)
}

// finish reads the rest of the answer whose head read gave resp and err.
func (w *wire) finish(c *conn, resp *http.Response, err error, want func(code int) bool) answer {
	if err != nil {
		if c.r.limit > 0 && c.r.n >= c.r.limit {
			// Past the bound, whatever the parser said: bufio hands over the line cut at the bound
			// before the read's error, and a cut such as "X-Flo" reads as a malformed header.
			err = errHeadTooLarge
		}
		c.close()
		return answer{err: errorKind(err)}
	}
	c.r.limit = 0 // the body is bounded by the deadline
	a := answer{code: resp.StatusCode}
	if !ok2xx(a.code) && want(a.code) {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, sampleBytes+1))
		if a.sample = oneLine(string(b)); a.sample == "" {
			a.sample = "(empty)"
		}
	}
	// The whole answer is part of its latency, and frees the connection for the next request.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		c.close()
		return answer{err: "reading the answer: " + errorKind(err)}
	}
	_ = resp.Body.Close()
	if resp.Close || a.code == http.StatusSwitchingProtocols {
		c.close() // as wrk and browsers do: the next request goes on a new connection
	} else {
		c.idle = time.Now()
	}
	return a
}

// read reads one final answer's head, skipping informational (1xx) ones.
func (w *wire) read(c *conn) (*http.Response, error) {
	if h, ok := readSimple(c.br, w.parse.Method); ok {
		c.body = fixedBody{r: c.br, n: h.length}
		c.resp = http.Response{StatusCode: h.code, Close: h.close, ContentLength: h.length, Body: &c.body}
		return &c.resp, nil
	}
	for range maxInformational {
		resp, err := http.ReadResponse(c.br, w.parse)
		if err != nil {
			if errors.Is(err, io.EOF) && c.r.n > 0 {
				err = io.ErrUnexpectedEOF // the answer was cut, not the connection idle
			}
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
	return nil, fmt.Errorf("more than %d informational (1xx) answers", maxInformational)
}

func (w *wire) connect(c *conn, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	nc, err := w.dialer.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return err
	}
	raw, _ := nc.(syscall.Conn)
	if w.tls != nil {
		tc := tls.Client(nc, w.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return err
		}
		nc = tc
	}
	c.use(nc, raw)
	return nil
}

// use makes nc (over the TCP connection raw) c's connection.
func (c *conn) use(nc net.Conn, raw syscall.Conn) {
	c.nc, c.raw = nc, raw
	c.r = countingReader{nc: nc}
	if c.br == nil {
		c.br = bufio.NewReaderSize(&c.r, readBufBytes)
	} else {
		c.br.Reset(&c.r)
	}
}

// resume takes over the connection the pacer opened and wrote the first written bytes of the request
// on (startWritten), writes the rest and reads the whole answer. sent is when the pacer began.
func (w *wire) resume(c *conn, s *socket, sent time.Time, want func(code int) bool) answer {
	nc, err := s.conn()
	if err != nil {
		return answer{err: errorKind(err)}
	}
	raw, _ := nc.(syscall.Conn)
	c.use(nc, raw)
	_ = nc.SetDeadline(sent.Add(w.timeout))
	c.r.n, c.r.limit = 0, maxHeadBytes
	if s.written < len(w.request) {
		// A connect still in progress (a target not on this machine) is waited for here, by the poller.
		if _, err := nc.Write(w.request[s.written:]); err != nil {
			c.close()
			return answer{err: "writing the request: " + errorKind(err)}
		}
	}
	resp, err := w.read(c)
	return w.finish(c, resp, err, want)
}

// idleCheck: a connection idle longer than this is checked before it carries a request (a target
// closes idle connections after its keep-alive timeout; writing into one that was closed fails the
// request). Below it no target's idle timeout has fired, and no syscall is spent.
const idleCheck = 5 * time.Millisecond
