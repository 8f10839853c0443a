package handlers

import (
	"net/http"
	"strconv"
)

// sent describes one published message in a reply.
type sent struct {
	id    string // empty for a payload taken from the request body
	topic string
	host  string
	size  int
}

// writeReply writes the small JSON reply of a send endpoint, built by hand because it is on the hot path:
//
//	{"broker":"nsq","topic":"t","published":1,"messages":[{"id":"…","topic":"t","host":"…","size":100}]}
//
// countKey is "published" (acknowledged by the broker) or "accepted" (handed to the async publisher).
func writeReply(w http.ResponseWriter, status int, broker, topic, countKey string, msgs []sent) {
	b := make([]byte, 0, 96+96*len(msgs))
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
		if m.id != "" {
			b = append(b, `"id":`...)
			b = appendString(b, m.id)
			b = append(b, ',')
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
}

// appendString appends s as a JSON string. Bytes >= 0x80 pass through unchanged.
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
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
