package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mqtarget/mqtarget/publishers"
)

// Error is an error with the status code and, for bad input, the field it concerns.
type Error struct {
	Status int
	Field  string // query parameter, "body", or configuration key; empty when no single field is at fault
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// badField is a 400 naming field. String arguments are the client's input: each is cut to maxEcho bytes
// before it is formatted, so a huge URL costs a huge answer neither in memory nor on the wire.
func badField(field, format string, args ...any) *Error {
	for i, a := range args {
		if v, ok := a.(string); ok {
			args[i] = cut(v)
		}
	}
	return &Error{Status: http.StatusBadRequest, Field: cut(field), Msg: fmt.Sprintf(format, args...)}
}

// badTopic is the 400 for a topic the broker's rules refuse, err their answer, after prefix: the rules
// quote the topic whole, so a long one is cut there as badField cuts any piece of the request.
func badTopic(field, topic, prefix string, err error) *Error {
	msg := err.Error()
	if len(topic) > maxEcho {
		short := cut(topic)
		msg = strings.ReplaceAll(msg, strconv.Quote(topic), strconv.Quote(short))
		msg = strings.ReplaceAll(msg, topic, short) // unquoted
	}
	return &Error{Status: http.StatusBadRequest, Field: field, Msg: prefix + msg}
}

// maxEcho bounds how much of one piece of input (a path, a parameter's name or value) an error answer
// repeats: enough to recognise it.
const maxEcho = 200

// maxErrorMsg bounds an error answer's message, whatever it quotes (a broker's error text may quote a
// topic whole); a backstop to maxEcho. JSON escaping doubles '"' and '\\', a control byte takes six.
const maxErrorMsg = 400

// cut returns s when it is at most maxEcho bytes, else its start and end around a note of how much was
// left out.
func cut(s string) string { return cutTo(s, maxEcho) }

// cutTo keeps the first two thirds and the last third of n bytes of s, on UTF-8 boundaries: the end of
// an error text usually says what is wrong.
func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n*2/3, len(s)-n/3
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + "…(" + strconv.Itoa(tail-head) + " bytes cut)…" + s[tail:]
}

// partialError reports that some messages of a request were acknowledged before another failed, so the
// client can account for them.
type partialError struct {
	published int
	err       error
}

func (e *partialError) Error() string { return e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

// StatusClientClosedRequest is nginx's 499: the client went away before its answer. It is never sent (there
// is no one to send it to); it is what the metrics and the log record, so a client that hangs up is not
// counted as a broker failure.
const StatusClientClosedRequest = 499

// clientGone is returned by a handler that finished its work after its client had gone away.
type clientGone struct{ published int }

func (e *clientGone) Error() string { return "client closed the request before its answer" }

// reply writes a send endpoint's reply, or returns clientGone when the client has left meanwhile, so
// the request is recorded as 499 rather than as a success no one received.
func reply(w http.ResponseWriter, r *http.Request, status int, broker, topic, countKey string, msgs []sent) error {
	if r.Context().Err() != nil {
		return &clientGone{published: len(msgs)}
	}
	writeReply(w, status, broker, topic, countKey, msgs)
	return nil
}

// handlerFunc is an HTTP handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// adapt turns a handlerFunc into an http.HandlerFunc; it is the one place errors become status codes.
func (s *Server) adapt(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	}
}

// fail answers a handler's error with its status code and logs it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, field := statusOf(err)
	published := 0
	var pe *partialError
	var cg *clientGone
	switch {
	case errors.As(err, &pe):
		published = pe.published
	case errors.As(err, &cg):
		published = cg.published
	}
	if r.Context().Err() != nil && status != http.StatusRequestTimeout {
		// Whatever the outcome, no one receives it; the broker's side of it is in the publish metrics.
		// (A body cut by http.read_timeout cancels the context too, but that is our doing: 408.)
		status, field = StatusClientClosedRequest, ""
	}
	// Per-request failures go to debug: under load a broker outage would otherwise flood the log,
	// and the metrics already count every one of them.
	lvl := slog.LevelDebug
	if status == http.StatusInternalServerError {
		lvl = slog.LevelError
	}
	s.log.Log(r.Context(), lvl, "request failed", "path", cut(r.URL.Path), "status", status, "err", err)
	writeError(w, status, field, err.Error(), published)
}

func statusOf(err error) (int, string) {
	var he *Error
	switch {
	case errors.As(err, &he):
		return he.Status, he.Field
	case errors.Is(err, publishers.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, ""
	case errors.Is(err, publishers.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, ""
	case errors.Is(err, publishers.ErrRejected):
		return http.StatusBadGateway, ""
	case errors.Is(err, publishers.ErrUnavailable), errors.Is(err, publishers.ErrClosed), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, ""
	default:
		return http.StatusInternalServerError, ""
	}
}

// writeError writes {"error":…,"field":…} (and "published" when some messages made it).
func writeError(w http.ResponseWriter, status int, field, msg string, published int) {
	b := make([]byte, 0, 128)
	b = append(b, `{"error":`...)
	b = appendString(b, cutTo(msg, maxErrorMsg))
	if field != "" {
		b = append(b, `,"field":`...)
		b = appendString(b, cut(field))
	}
	if published > 0 {
		b = append(b, `,"published":`...)
		b = strconv.AppendInt(b, int64(published), 10)
	}
	b = append(b, "}\n"...)
	writeJSON(w, status, b)
}
