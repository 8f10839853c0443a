package handlers

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// payload returns the body of one message: the request body, or a generated payload with a new id.
func (s *Server) payload(req *sendRequest, topic, host string) ([]byte, sent) {
	if req.body != nil {
		return req.body, sent{topic: topic, host: host, size: len(req.body)}
	}
	id := s.ids.NextID()
	return s.ids.Build(id, req.size), sent{id: id, hasID: true, topic: topic, host: host, size: req.size}
}

// spread returns the index of the request's topic in its ?topics=N spread, or -1 without a spread.
func (s *Server) spread(req *sendRequest) int {
	if req.topics <= 1 {
		return -1
	}
	return s.topicSeq.next(req.topics)
}

// topicAt returns base itself for k < 0, else the k-th topic of a spread.
func topicAt(base string, k int) string {
	if k < 0 {
		return base
	}
	return topicName(base, k)
}

// roundRobin hands out 0..n-1 in turn; safe for concurrent use.
type roundRobin struct{ n atomic.Uint64 }

func (rr *roundRobin) next(n int) int { return int((rr.n.Add(1) - 1) % uint64(n)) }

// publishCtx is the context a publish is handed to a broker client with: detached from the client's
// cancellation, so a publish, once started, finishes under publish_timeout whatever the client does (a
// client retry loop that resends after a cancellation would otherwise store the message again).
//
// Its deadline counts from when the instrumentation started serving the request (the clock read it
// made already), or from now after a request body, whose upload must not eat into publish_timeout.
func (s *Server) publishCtx(w http.ResponseWriter, r *http.Request) context.Context {
	sw, ok := w.(*statusWriter)
	if !ok || (r.Body != nil && r.Body != http.NoBody) {
		return s.deadlines.get(time.Now())
	}
	return s.deadlines.get(sw.start)
}

// send1 publishes one message to the first host and answers once the broker acknowledged it.
func (s *Server) send1(w http.ResponseWriter, r *http.Request) error {
	req, err := s.parseSend(w, r)
	if err != nil {
		return err
	}
	return s.publishOne(w, r, &req, 0)
}

// publishOne publishes one message to host and replies once the broker acknowledged it.
func (s *Server) publishOne(w http.ResponseWriter, r *http.Request, req *sendRequest, host int) error {
	topic := topicAt(req.topic, s.spread(req))
	body, m := s.payload(req, topic, req.pub.Hosts()[host])
	ctx := s.publishCtx(w, r)
	if err := req.pub.Publish(ctx, host, topic, body); err != nil {
		return err
	}
	return reply(w, r, http.StatusOK, req.broker, topic, "published", []sent{m})
}

// send2 publishes two messages to one topic: one batch (the broker's PublishBatch) by default, two publishes one after
// the other with ?mode=sequential.
func (s *Server) send2(w http.ResponseWriter, r *http.Request) error {
	req, err := s.parseSend(w, r)
	if err != nil {
		return err
	}
	topic := topicAt(req.topic, s.spread(&req))
	host := req.pub.Hosts()[0]
	b1, m1 := s.payload(&req, topic, host)
	b2, m2 := s.payload(&req, topic, host)
	ctx := s.publishCtx(w, r)
	if req.mode == modeSequential {
		if err := req.pub.Publish(ctx, 0, topic, b1); err != nil {
			return err
		}
		if err := req.pub.Publish(ctx, 0, topic, b2); err != nil {
			return &partialError{published: 1, err: err}
		}
	} else if err := req.pub.PublishBatch(ctx, 0, topic, [][]byte{b1, b2}); err != nil {
		return err
	}
	return reply(w, r, http.StatusOK, req.broker, topic, "published", []sent{m1, m2})
}

// send2Topic publishes one message to each of two topics, both in flight at once.
func (s *Server) send2Topic(w http.ResponseWriter, r *http.Request) error {
	req, err := s.parseSend(w, r)
	if err != nil {
		return err
	}
	if err := s.topics.admit(req.broker, req.topic2, req.topics); err != nil { // only this endpoint uses topic2
		return err
	}
	// Both topics share the request's spread index, so a sweep touches N topics of each kind.
	k := s.spread(&req)
	topic1, topic2 := topicAt(req.topic, k), topicAt(req.topic2, k)
	host := req.pub.Hosts()[0]
	b1, m1 := s.payload(&req, topic1, host)
	b2, m2 := s.payload(&req, topic2, host)
	ctx := s.publishCtx(w, r)
	second := make(chan error, 1)
	pub := req.pub // the goroutine captures only what it needs, so req stays on the stack
	go func() { second <- pub.Publish(ctx, 0, topic2, b2) }()
	err1 := pub.Publish(ctx, 0, topic1, b1)
	err2 := <-second // waited for in every case: the goroutine is this handler's
	switch {
	case err1 != nil && err2 != nil:
		return err1
	case err1 != nil:
		return &partialError{published: 1, err: fmt.Errorf("topic %s: %w", topic1, err1)}
	case err2 != nil:
		return &partialError{published: 1, err: fmt.Errorf("topic %s: %w", topic2, err2)}
	}
	return reply(w, r, http.StatusOK, req.broker, topic1, "published", []sent{m1, m2})
}

// sendAsync hands one message to the async publisher and answers 202 at once; 429 when the in-flight
// limit is reached.
func (s *Server) sendAsync(w http.ResponseWriter, r *http.Request) error {
	req, err := s.parseSend(w, r)
	if err != nil {
		return err
	}
	topic := topicAt(req.topic, s.spread(&req))
	body, m := s.payload(&req, topic, req.pub.Hosts()[0])
	if err := s.startAsync(&req, topic, body, nil); err != nil {
		return err
	}
	return reply(w, r, http.StatusAccepted, req.broker, topic, "accepted", []sent{m})
}

// sendAsyncWait publishes asynchronously and answers when the broker's completion arrives, or 504 after
// the publish timeout (the publish stays accounted for by the async limiter).
func (s *Server) sendAsyncWait(w http.ResponseWriter, r *http.Request) error {
	req, err := s.parseSend(w, r)
	if err != nil {
		return err
	}
	topic := topicAt(req.topic, s.spread(&req))
	body, m := s.payload(&req, topic, req.pub.Hosts()[0])
	result := make(chan error, 1) // buffered: the callback must never block on a request that timed out
	// The deadline starts before the hand-over: the publish may wait for a connection being made or a
	// topic being looked up (on the publisher's goroutine), and the answer must still come within
	// publish_timeout of the request.
	ctx := s.publishCtx(w, r)
	if err := s.startAsync(&req, topic, body, func(err error) { result <- err }); err != nil {
		return err
	}
	select {
	case err := <-result:
		if err != nil {
			return err
		}
	case <-r.Context().Done():
		// The client left; the publish stays accounted for by the async limiter.
		return &clientGone{}
	case <-ctx.Done():
		return &Error{Status: http.StatusGatewayTimeout, Msg: "no broker acknowledgement within publish_timeout (" + s.publishTimeout.String() + "); the message is still in flight"}
	}
	return reply(w, r, http.StatusOK, req.broker, topic, "published", []sent{m})
}

// startAsync takes an async slot and starts the publish; the slot is released when it completes, then
// then (if not nil) is called with the outcome.
func (s *Server) startAsync(req *sendRequest, topic string, body []byte, then func(error)) error {
	size := len(body)
	if !s.async.acquire(size) {
		switch {
		case s.async.closed.Load():
			return &Error{Status: http.StatusServiceUnavailable, Msg: "shutting down"}
		case s.async.inFlight.Load() >= s.async.limit:
			return &Error{Status: http.StatusTooManyRequests, Field: "async.max_in_flight",
				Msg: fmt.Sprintf("async in-flight limit reached (%d publishes awaiting the broker)", s.async.limit)}
		default:
			return &Error{Status: http.StatusTooManyRequests, Field: "async.max_in_flight_bytes",
				Msg: fmt.Sprintf("async in-flight bytes limit reached (%d bytes of messages awaiting the broker)", s.async.maxBytes)}
		}
	}
	done := func(err error) {
		s.async.done(err, size)
		if then != nil {
			then(err)
		}
	}
	if err := req.pub.PublishAsync(0, topic, body, done); err != nil {
		s.async.cancel(size)
		return err
	}
	s.async.accept()
	return nil
}

// sendNHost returns a handler publishing one message per request round-robin over the first n hosts.
func (s *Server) sendNHost(n int) handlerFunc {
	seq := new(roundRobin)
	return func(w http.ResponseWriter, r *http.Request) error {
		req, err := s.parseSend(w, r)
		if err != nil {
			return err
		}
		hosts := req.pub.Hosts()
		if len(hosts) < n {
			// The setting named is the entry's addresses setting, the one that points at the hosts
			// (for a cluster, its bootstrap or name-server list: the hosts are the brokers behind it).
			setting := req.broker + ".hosts"
			if b := brokers.Lookup(req.broker); b != nil {
				setting = b.AddrsSetting()
			}
			return &Error{Status: http.StatusServiceUnavailable, Field: setting,
				Msg: fmt.Sprintf("%s needs %d %s hosts, %s gives %d", cut(r.URL.Path), n, req.broker, setting, len(hosts))}
		}
		return s.publishOne(w, r, &req, seq.next(n))
	}
}
