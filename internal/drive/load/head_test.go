package load

import (
	"bufio"
	"bytes"
	"cmp"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestReadSimple: the heads read without net/http, and the ones left to it.
func TestReadSimple(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		method   string
		size     int // the reader's buffer; 0: 4096
		want     simpleHead
		ok       bool
	}{
		{name: "ok", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", want: simpleHead{200, 2, false}, ok: true},
		{name: "no reason", in: "HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n", want: simpleHead{503, 0, false}, ok: true},
		{name: "close among tokens", in: "HTTP/1.1 429 Too Many\r\ncontent-length:  5 \r\nConnection: keep-alive, Close\r\n\r\nslow!", want: simpleHead{429, 5, true}, ok: true},
		{name: "other headers", in: "HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 10:00:00 GMT\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", want: simpleHead{200, 2, false}, ok: true},
		{name: "HEAD", method: http.MethodHead, in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"},
		{name: "no length", in: "HTTP/1.1 200 OK\r\n\r\nuntil close"},
		{name: "two lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"},
		{name: "signed length", in: "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"},
		{name: "1xx", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "204", in: "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"},
		{name: "http/1.0", in: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "space before colon", in: "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n"},
		{name: "obs-fold", in: "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 0\r\n\r\n"},
		{name: "control in value", in: "HTTP/1.1 200 OK\r\nX-A: \x01\r\nContent-Length: 0\r\n\r\n"},
		{name: "bare LF", in: "HTTP/1.1 200 OK\nContent-Length: 0\n\n"},
		{name: "garbage", in: "SSH-2.0-OpenSSH_9.6\r\n\r\n"},
		{name: "cut", in: "HTTP/1.1 200 OK\r\nContent-Le"},
		{name: "longer than the buffer", size: 16, in: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), cmp.Or(tc.size, 4096))
			h, ok := readSimple(br, cmp.Or(tc.method, http.MethodGet))
			if ok != tc.ok || ok && h != tc.want {
				t.Fatalf("readSimple = %+v, %v; want %+v, %v", h, ok, tc.want, tc.ok)
			}
			if !ok { // nothing consumed: net/http reads it all from the start
				rest, _ := io.ReadAll(br)
				if string(rest) != tc.in {
					t.Errorf("left %q, want %q", rest, tc.in)
				}
			}
		})
	}
}

// FuzzReadSimple: whatever readSimple reads, net/http reads alike (status, length, close, body).
func FuzzReadSimple(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{\"a\":\"b\"}",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-\xff: y\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 \xc3\xa9\r\nContent-Length: 1\r\n\r\nx",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, ok := readSimple(bufio.NewReader(strings.NewReader(in)), http.MethodGet)
		if !ok {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(in)), &http.Request{Method: http.MethodGet})
		if err != nil {
			t.Fatalf("readSimple took %q as %+v; net/http: %v", in, h, err)
		}
		body, berr := io.ReadAll(resp.Body)
		if resp.StatusCode != h.code || resp.ContentLength != h.length || resp.Close != h.close {
			t.Fatalf("%q: readSimple %+v, net/http status %d length %d close %v", in, h, resp.StatusCode, resp.ContentLength, resp.Close)
		}
		br := bufio.NewReader(strings.NewReader(in))
		readSimple(br, http.MethodGet)
		fb := &fixedBody{r: br, n: h.length}
		mine, merr := io.ReadAll(fb)
		if !bytes.Equal(mine, body) || (merr == nil) != (berr == nil) {
			t.Fatalf("%q: body %q (%v), net/http %q (%v)", in, mine, merr, body, berr)
		}
	})
}

// repeat reads s over and over.
type repeat struct {
	s   string
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.off:])
		n += c
		r.off = (r.off + c) % len(r.s)
	}
	return n, nil
}

// BenchmarkReadAnswer: one /send1 answer's head and body read, by readSimple and by net/http.
func BenchmarkReadAnswer(b *testing.B) {
	const body = `{"broker":"stomp","topic":"x","published":1,"messages":[{"id":"a23639000001273d","topic":"x","host":"127.0.0.1:27613","size":100}]}`
	answer := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Tue, 01 Dec 2026 15:10:27 GMT\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	w := &wire{parse: &http.Request{Method: http.MethodGet}}
	for _, tc := range []struct {
		name string
		read func(c *conn) (*http.Response, error)
	}{
		{"readSimple", w.read},
		{"net/http", func(c *conn) (*http.Response, error) { return http.ReadResponse(c.br, w.parse) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &conn{br: bufio.NewReaderSize(&repeat{s: answer}, readBufBytes)}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tc.read(c)
				if err != nil || resp.StatusCode != 200 {
					b.Fatal(resp, err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
