package handlers

import (
	"errors"
	"io"
	"net/http"
	"net/url"
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

// Query parameters of the send endpoints, as indexes into params; anything else is a typo worth reporting.
const (
	pBroker = iota
	pTopic
	pTopic2
	pSize
	pTopics
	pMode
	nParams
)

var paramNames = [nParams]string{"broker", "topic", "topic2", "size", "topics", "mode"}

// params are the send parameters of one query: the first value of each and whether it was given.
type params struct {
	val [nParams]string
	has [nParams]bool
}

// maxQueryPairs is net/url's default limit (GODEBUG urlmaxqueryparams): beyond it url.Query ignores
// the whole query, and so does parseParams.
const maxQueryPairs = 10000

// parseParams reads a raw query as url.ParseQuery does (pairs split on '&'; pairs holding ';' or
// undecodable escapes skipped; the first value wins, as with Values.Get) without building a map, which
// would be an allocation per request. unknown is the first parameter that is not a send parameter.
func parseParams(raw string) (p params, unknown string, found bool) {
	if strings.Count(raw, "&") >= maxQueryPairs {
		return p, "", false
	}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(k)
		if err != nil {
			continue
		}
		if v, err = url.QueryUnescape(v); err != nil {
			continue
		}
		i := paramIndex(k)
		switch {
		case i < 0:
			if !found {
				unknown, found = k, true
			}
		case !p.has[i]:
			p.val[i], p.has[i] = v, true
		}
	}
	return p, unknown, found
}

func paramIndex(name string) int {
	for i, n := range paramNames {
		if n == name {
			return i
		}
	}
	return -1
}

// parseSend reads the query parameters and body of a send request.
func (s *Server) parseSend(w http.ResponseWriter, r *http.Request) (sendRequest, error) {
	q, unknown, found := parseParams(r.URL.RawQuery)
	if found {
		return sendRequest{}, badField(unknown, "unknown parameter %q (known: broker, topic, topic2, size, topics, mode)", unknown)
	}
	req := sendRequest{broker: s.defaultBroker, topic: s.topic, topic2: s.topic2, size: s.size, mode: modeBatch, topics: 1}
	if v := q.val[pBroker]; v != "" {
		req.broker = v
	}
	req.pub = s.pubs[req.broker]
	if req.pub == nil {
		return sendRequest{}, badField("broker", "unknown broker %q (available: %s)", req.broker, strings.Join(s.brokerNames, ", "))
	}
	if q.has[pTopic] {
		req.topic = q.val[pTopic]
	}
	if q.has[pTopic2] {
		req.topic2 = q.val[pTopic2]
	}
	for _, t := range []struct{ field, name string }{{"topic", req.topic}, {"topic2", req.topic2}} {
		if err := req.pub.ValidateTopic(t.name); err != nil {
			return sendRequest{}, badField(t.field, "%v", err)
		}
	}
	if v := q.val[pSize]; q.has[pSize] {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return sendRequest{}, badField("size", "%q is not an integer", v)
		case n < 1 || n > s.maxSize:
			return sendRequest{}, badField("size", "must be 1..%d bytes, got %d", s.maxSize, n)
		}
		req.size = n
	}
	if v := q.val[pTopics]; q.has[pTopics] {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return sendRequest{}, badField("topics", "%q is not an integer", v)
		case n < 1 || n > MaxTopics:
			return sendRequest{}, badField("topics", "must be 1..%d, got %d", MaxTopics, n)
		}
		req.topics = n
		if n > 1 {
			// The longest generated names must be valid too.
			for _, base := range []string{req.topic, req.topic2} {
				if err := req.pub.ValidateTopic(topicName(base, n-1)); err != nil {
					return sendRequest{}, badField("topics", "topic names with suffix -%d are invalid: %v", n-1, err)
				}
			}
		}
	}
	switch v := q.val[pMode]; v {
	case "", modeBatch:
	case modeSequential:
		req.mode = modeSequential
	default:
		return sendRequest{}, badField("mode", "must be batch or sequential, got %q", v)
	}
	if r.Body != nil && r.Body != http.NoBody && r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.maxSize)))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return sendRequest{}, &Error{Status: http.StatusRequestEntityTooLarge, Field: "body", Msg: "request body exceeds message.max_size (" + strconv.Itoa(s.maxSize) + " bytes)"}
		case err != nil:
			return sendRequest{}, badField("body", "reading request body: %v", err)
		}
		if len(body) > 0 {
			if q.has[pSize] {
				return sendRequest{}, badField("size", "cannot be combined with a request body (the body is the payload)")
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
