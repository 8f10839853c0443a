package handlers

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
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

// maxQueryPairs bounds the pairs of a query (empty ones included). A valid query has at most one pair per
// send parameter; the bound only keeps the refusal of a huge one cheap.
const maxQueryPairs = 100

// maxQueryBytes bounds a raw query: six parameters with topic names of a few hundred bytes fit many
// times over.
const maxQueryBytes = 8 << 10

// parseParams reads a raw query without building a map, which would be an allocation per request. Unlike
// url.ParseQuery, which skips what it cannot parse, every malformed part is an error, so a typo never
// silently benchmarks the defaults: a ';' (not a separator), an undecodable %-escape, an empty name, an
// unknown or repeated parameter, or more than maxQueryPairs pairs. Errors name the parameter, or
// "query" when there is no name to give.
func parseParams(raw string) (p params, err *Error) {
	if len(raw) > maxQueryBytes {
		// Refused before it is unescaped or quoted: a huge query costs no copies.
		return p, badField("query", "%d bytes, at most %d are read", len(raw), maxQueryBytes)
	}
	if n := strings.Count(raw, "&") + 1; n > maxQueryPairs {
		return p, badField("query", "%d parameters, at most %d are read", n, maxQueryPairs)
	}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue // "a=1&&b=2", a trailing '&': nothing is lost
		}
		if strings.Contains(pair, ";") {
			return p, badField("query", "%q: ';' does not separate parameters, '&' does", pair)
		}
		k, v, _ := strings.Cut(pair, "=")
		name, kerr := url.QueryUnescape(k)
		switch {
		case kerr != nil:
			return p, badField("query", "parameter name %q: %v", k, kerr)
		case name == "":
			return p, badField("query", "%q: empty parameter name", pair)
		}
		i := paramIndex(name)
		if i < 0 {
			return p, badField(name, "unknown parameter %q (known: broker, topic, topic2, size, topics, mode)", name)
		}
		if p.has[i] {
			return p, badField(name, "given more than once")
		}
		if p.val[i], kerr = url.QueryUnescape(v); kerr != nil {
			return p, badField(name, "%q: %v", v, kerr)
		}
		p.has[i] = true
	}
	return p, nil
}

func paramIndex(name string) int {
	for i, n := range paramNames {
		if n == name {
			return i
		}
	}
	return -1
}

// applies says which parameters an endpoint takes: mode only /send2's, topic2 only /send2Topic's. A
// parameter an endpoint would ignore is refused (400 naming it), like an unknown one: /send1?mode=batch
// would otherwise run the default and look like a measurement of what was asked.
func applies(path string, i int) bool {
	switch i {
	case pMode:
		return path == "/send2"
	case pTopic2:
		return path == "/send2Topic"
	case pTopics:
		return path != "/sendRoundTrip"
	}
	return true
}

// takes lists the parameters path takes, for the error.
func takes(path string) string {
	var names []string
	for i, n := range paramNames {
		if applies(path, i) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// parseSend reads the query parameters and body of a send request.
func (s *Server) parseSend(w http.ResponseWriter, r *http.Request) (sendRequest, error) {
	q, qerr := parseParams(r.URL.RawQuery)
	if qerr != nil {
		return sendRequest{}, qerr
	}
	for i, has := range q.has {
		if has && !applies(r.URL.Path, i) {
			return sendRequest{}, badField(paramNames[i], "does not apply to %s (it takes %s)", cut(r.URL.Path), takes(r.URL.Path))
		}
	}
	req := sendRequest{broker: s.defaultBroker, topic: s.topic, topic2: s.topic2, size: s.size, mode: modeBatch, topics: 1}
	if v := q.val[pBroker]; v != "" {
		req.broker = v
	}
	req.pub = s.pubs[req.broker]
	if req.pub == nil {
		if brokers.Lookup(req.broker) != nil {
			return sendRequest{}, badField("broker", "broker %q is not enabled by this configuration (enabled: %s)",
				req.broker, strings.Join(s.brokerNames, ", "))
		}
		return sendRequest{}, badField("broker", "unknown broker %q (available: %s)", req.broker, strings.Join(s.brokerNames, ", "))
	}
	if q.has[pTopic] {
		req.topic = q.val[pTopic]
	}
	if q.has[pTopic2] {
		req.topic2 = q.val[pTopic2]
	}
	if err := req.pub.ValidateTopic(req.topic); err != nil {
		return sendRequest{}, badTopic("topic", req.topic, "", err)
	}
	bases := [2]string{req.topic, req.topic2}
	used := bases[:1]
	if r.URL.Path == "/send2Topic" { // the only endpoint that publishes to topic2
		if err := req.pub.ValidateTopic(req.topic2); err != nil {
			return sendRequest{}, badTopic("topic2", req.topic2, "", err)
		}
		used = bases[:2]
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
			for _, base := range used {
				name := topicName(base, n-1)
				if err := req.pub.ValidateTopic(name); err != nil {
					return sendRequest{}, badTopic("topics", name, fmt.Sprintf("topic names with suffix -%d are invalid: ", n-1), err)
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
		if r.ContentLength > int64(s.maxSize) {
			// Before any read: a client sending "Expect: 100-continue" is not invited to send the body, and
			// the answer goes out at once, closing the connection (boundBody).
			return sendRequest{}, errTooLarge(s.maxSize)
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.maxSize)))
		var tooBig *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooBig):
			return sendRequest{}, errTooLarge(s.maxSize)
		case errors.As(err, &netErr) && netErr.Timeout():
			// net/http closes the connection after this answer: the rest of the body is not worth waiting for.
			return sendRequest{}, &Error{Status: http.StatusRequestTimeout, Field: "body",
				Msg: "request body not received within http.read_timeout (" + s.readTimeout.String() + ")"}
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
	// Last, so a request refused for another reason adds no topic names.
	if err := s.topics.admit(req.broker, req.topic, req.topics); err != nil {
		return sendRequest{}, err
	}
	return req, nil
}

func errTooLarge(maxSize int) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Field: "body",
		Msg: "request body exceeds message.max_size (" + strconv.Itoa(maxSize) + " bytes)"}
}

// topicName returns the k-th topic of a ?topics=N spread: "<base>-<k>", keeping a "#ephemeral"-style
// suffix at the end where a broker requires it.
func topicName(base string, k int) string {
	name, suffix, found := strings.Cut(base, "#")
	if found {
		suffix = "#" + suffix
	}
	return name + "-" + strconv.Itoa(k) + suffix
}
