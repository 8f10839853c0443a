package handlers

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/mqtarget/mqtarget/publishers"
)

// MaxTopics bounds ?topics=N.
const MaxTopics = 10000

// Send modes for /send2.
const (
	modeBatch      = "batch"
	modeSequential = "sequential"
)

// sendRequest is a parsed and validated send request.
type sendRequest struct {
	broker string
	pub    publishers.Publisher
	topic  string
	topic2 string
	size   int    // payload size for generated payloads
	body   []byte // payload from a POST body; nil means generate
	mode   string
	topics int // spread over this many topics
}

// knownParams are the query parameters of the send endpoints; anything else is a typo worth reporting.
var knownParams = map[string]bool{"broker": true, "topic": true, "topic2": true, "size": true, "topics": true, "mode": true}

// parseSend reads the query parameters and body of a send request.
func (s *Server) parseSend(w http.ResponseWriter, r *http.Request) (*sendRequest, error) {
	q := r.URL.Query()
	for k := range q {
		if !knownParams[k] {
			return nil, badField(k, "unknown parameter %q (known: broker, topic, topic2, size, topics, mode)", k)
		}
	}
	req := &sendRequest{broker: s.defaultBroker, topic: s.topic, topic2: s.topic2, size: s.size, mode: modeBatch, topics: 1}
	if v := q.Get("broker"); v != "" {
		req.broker = v
	}
	req.pub = s.pubs[req.broker]
	if req.pub == nil {
		return nil, badField("broker", "unknown broker %q (available: %s)", req.broker, strings.Join(s.brokerNames, ", "))
	}
	if q.Has("topic") {
		req.topic = q.Get("topic")
	}
	if q.Has("topic2") {
		req.topic2 = q.Get("topic2")
	}
	for _, t := range []struct{ field, name string }{{"topic", req.topic}, {"topic2", req.topic2}} {
		if err := req.pub.ValidateTopic(t.name); err != nil {
			return nil, badField(t.field, "%v", err)
		}
	}
	if v := q.Get("size"); q.Has("size") {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return nil, badField("size", "%q is not an integer", v)
		case n < 1 || n > s.maxSize:
			return nil, badField("size", "must be 1..%d bytes, got %d", s.maxSize, n)
		}
		req.size = n
	}
	if v := q.Get("topics"); q.Has("topics") {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return nil, badField("topics", "%q is not an integer", v)
		case n < 1 || n > MaxTopics:
			return nil, badField("topics", "must be 1..%d, got %d", MaxTopics, n)
		}
		req.topics = n
		if n > 1 {
			// The longest generated names must be valid too.
			for _, base := range []string{req.topic, req.topic2} {
				if err := req.pub.ValidateTopic(topicName(base, n-1)); err != nil {
					return nil, badField("topics", "topic names with suffix -%d are invalid: %v", n-1, err)
				}
			}
		}
	}
	switch v := q.Get("mode"); v {
	case "", modeBatch:
	case modeSequential:
		req.mode = modeSequential
	default:
		return nil, badField("mode", "must be batch or sequential, got %q", v)
	}
	if r.Body != nil && r.Body != http.NoBody && r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.maxSize)))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Field: "body", Msg: "request body exceeds message.max_size (" + strconv.Itoa(s.maxSize) + " bytes)"}
		case err != nil:
			return nil, badField("body", "reading request body: %v", err)
		}
		if len(body) > 0 {
			if q.Has("size") {
				return nil, badField("size", "cannot be combined with a request body (the body is the payload)")
			}
			req.body = body
		}
	}
	return req, nil
}

// topicName returns the k-th topic of a ?topics=N spread: "<base>-<k>", keeping a "#ephemeral"-style
// suffix at the end where NSQ requires it.
func topicName(base string, k int) string {
	name, suffix, found := strings.Cut(base, "#")
	if found {
		suffix = "#" + suffix
	}
	return name + "-" + strconv.Itoa(k) + suffix
}
