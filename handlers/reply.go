package handlers

import (
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/mqtarget/mqtarget/message"
)

// sent describes one published message in a reply.
type sent struct {
	id    uint64 // rendered only when hasID; a payload taken from the request body has none
	hasID bool
	topic string
	host  string
	size  int
}

// replyBufs recycles reply buffers: a reply is copied by w.Write (io.Writer must not retain it), so the
// buffer is free again once written, and the hot path allocates none.
var replyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// jsonContentType is shared by every reply: net/http copies the value slices when it writes the
// header and nothing modifies them in place (Header.Set replaces a slice), so one slice serves all.
var jsonContentType = []string{"application/json"}

// netHTTPBuffer is net/http's bufferBeforeChunkingSize: a body of at most this many bytes, written
// before the handler returns, gets its Content-Length from net/http itself, which formats it into
// the response without a header map entry (and without the header clone and sort that one costs).
const netHTTPBuffer = 2048

// writeJSON writes body with its Content-Type and Content-Length.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if len(body) >= netHTTPBuffer {
		// Larger bodies would be sent chunked: they get it here.
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeReply writes the small JSON reply of a send endpoint, built by hand because it is on the hot path:
//
//	{"broker":"b","topic":"t","published":1,"messages":[{"id":"…","topic":"t","host":"…","size":100}]}
//
// countKey is "published" (acknowledged by the broker) or "accepted" (handed to the async publisher).
func writeReply(w http.ResponseWriter, status int, broker, topic, countKey string, msgs []sent) {
	bp := replyBufs.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, `{"broker":`...)
	b = appendString(b, broker)
	b = append(b, `,"topic":`...)
	b = appendString(b, topic)
	b = append(b, `,"`...)
	b = append(b, countKey...)
	b = append(b, `":`...)
	b = strconv.AppendInt(b, int64(len(msgs)), 10)
	b = append(b, `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if m.hasID {
			b = append(b, `"id":"`...)
			b = message.AppendID(b, m.id)
			b = append(b, `",`...)
		}
		b = append(b, `"topic":`...)
		b = appendString(b, m.topic)
		b = append(b, `,"host":`...)
		b = appendString(b, m.host)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, int64(m.size), 10)
		b = append(b, '}')
	}
	b = append(b, "]}\n"...)
	writeJSON(w, status, b)
	if cap(b) <= 64<<10 { // a reply to ?topics= with huge names must not stay in the pool
		*bp = b
		replyBufs.Put(bp)
	}
}

// appendString appends s as a JSON string. Valid UTF-8 passes through unchanged; each invalid byte
// (a raw path or parameter name can hold any) becomes U+FFFD, as with encoding/json, so the reply parses.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size - 1
		}
	}
	return append(b, '"')
}
