package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/message"
)

// RoundTripper publishes a message and waits for its ack; *roundtrip.Client is the one in use.
type RoundTripper interface {
	RoundTrip(ctx context.Context, host int, topic string, body []byte) (roundtrip.Ack, error)
}

// sendRoundTrip publishes one message to the first host and answers once its ack came back from an
// echo, with the round-trip time; 504 when no ack came within publish_timeout (publish included).
func (s *Server) sendRoundTrip(w http.ResponseWriter, r *http.Request) error {
	req, err := s.parseSend(w, r)
	if err != nil {
		return err
	}
	if req.body != nil {
		return badField("body", "/sendRoundTrip generates its payload (the ack is matched by its id); send no body")
	}
	if req.topics > 1 {
		return badField("topics", "/sendRoundTrip sends to one topic")
	}
	if req.size < message.HeaderLen { // also message.size's default: the client can still pass ?size=
		return badField("size", "/sendRoundTrip needs at least %d bytes (the id and send time its ack is matched by), got %d",
			message.HeaderLen, req.size)
	}
	if s.roundTripTopic != "" && !r.URL.Query().Has("topic") {
		req.topic = s.roundTripTopic
	}
	rt := s.roundTrips[req.broker]
	if rt == nil {
		return &Error{Status: http.StatusNotImplemented, Field: "echo.roundtrip",
			Msg: "round trips are off for broker " + req.broker + " (echo.roundtrip)"}
	}
	id := s.ids.NextID()
	body := s.ids.Build(id, req.size)
	ctx := s.publishCtx(w, r)
	ack, err := rt.RoundTrip(ctx, 0, req.topic, body)
	switch {
	case errors.Is(err, roundtrip.ErrTopic):
		return badField("topic", "no round trip on topic %q: echo.topics lists the topics whose acks are consumed", req.topic)
	case errors.Is(err, roundtrip.ErrLost):
		return &Error{Status: http.StatusGatewayTimeout, Msg: "no ack within publish_timeout (" + s.publishTimeout.String() + "): is an echo running?"}
	case err != nil:
		return err
	}
	if r.Context().Err() != nil {
		return &clientGone{published: 1}
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"broker":`...)
	b = appendString(b, req.broker)
	b = append(b, `,"topic":`...)
	b = appendString(b, req.topic)
	b = append(b, `,"id":"`...)
	b = message.AppendID(b, id)
	b = append(b, `","host":`...)
	b = appendString(b, req.pub.Hosts()[0])
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(req.size), 10)
	b = append(b, `,"rtt_ms":`...)
	b = strconv.AppendFloat(b, float64(ack.RTT.Microseconds())/1000, 'f', 3, 64)
	b = append(b, "}\n"...)
	writeJSON(w, http.StatusOK, b)
	return nil
}
