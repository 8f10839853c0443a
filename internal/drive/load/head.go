package load

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
)

// The common answer's head, read without net/http: a final status, one Content-Length, maybe
// "Connection: close", nothing else that changes the framing. http.ReadResponse builds a header map
// and a Response per answer: a fifth of the generator's CPU per request in the closed model. Every
// other head (1xx, chunked, no length, HEAD, 204/304, HTTP/1.0, anything net/http might read
// differently or refuse) goes to http.ReadResponse, which then reads the same bytes from the start:
// this only peeks until it has decided.

// simpleHead is what readSimple found: the status, the body's length, whether the target closes.
type simpleHead struct {
	code   int
	length int64
	close  bool
}

// readSimple returns the head of the next answer on br when it is a simple one, consumed; ok false
// leaves br as it was (bytes may have been read into its buffer, none consumed).
func readSimple(br *bufio.Reader, method string) (h simpleHead, ok bool) {
	if method == http.MethodHead {
		return h, false
	}
	n := 1
	for {
		b, err := br.Peek(max(n, br.Buffered()))
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			h, ok = parseSimple(b[:i+2])
			if ok {
				_, _ = br.Discard(i + 4)
			}
			return h, ok
		}
		if err != nil || len(b) >= br.Size() {
			return h, false // net/http reports the error, or reads the long head
		}
		n = len(b) + 1
	}
}

// parseSimple parses head (status line and header lines, each ending in CRLF, without the blank
// line). Anything outside the simple form is not ok.
func parseSimple(head []byte) (h simpleHead, ok bool) {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// "HTTP/1.1 200" then " reason" or nothing.
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') {
		return h, false
	}
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return h, false
		}
		h.code = h.code*10 + int(d-'0')
	}
	if h.code < 200 || h.code == http.StatusNoContent || h.code == http.StatusNotModified {
		return h, false
	}
	if !fieldText(line[12:]) {
		return h, false
	}
	h.length = -1
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || !token(name) {
			return h, false // obs-fold, a space before the colon, no colon: net/http's call
		}
		value = bytes.Trim(value, " \t")
		if !fieldText(value) {
			return h, false
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if h.length >= 0 || len(value) == 0 || len(value) > 18 {
				return h, false // a second one (net/http compares them), empty, or huge
			}
			h.length = 0
			for _, d := range value {
				if d < '0' || d > '9' {
					return h, false
				}
				h.length = h.length*10 + int64(d-'0')
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return h, false
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				if bytes.EqualFold(bytes.Trim(tok, " \t"), []byte("close")) {
					h.close = true
				}
			}
		}
	}
	return h, h.length >= 0
}

// token: a header field name (RFC 9110 tchar+).
func token(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tchar[c] {
			return false
		}
	}
	return true
}

// fieldText: a field value or reason phrase, no control characters but tab (obs-text allowed).
func fieldText(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

var tchar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// fixedBody is a simple answer's body: n bytes left on r.
type fixedBody struct {
	r *bufio.Reader
	n int64
}

func (b *fixedBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF // cut short, as net/http says
	}
	return n, err
}

// WriteTo skips the rest of the body in the reader's buffer when w discards it (io.Copy to io.Discard
// calls it), without copying.
func (b *fixedBody) WriteTo(w io.Writer) (int64, error) {
	if w != io.Discard {
		return io.Copy(w, struct{ io.Reader }{b})
	}
	d, err := b.r.Discard(int(b.n))
	b.n -= int64(d)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return int64(d), err
}

func (b *fixedBody) Close() error { return nil }
