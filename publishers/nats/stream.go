package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqtarget/mqtarget/publishers"
)

// maxStreams bounds the topics per host whose streams mqtarget looks up or creates: each is a stream
// on the server (with nats.stream empty) and an entry here. Beyond it a new topic is refused (502).
const maxStreams = 1024

// streams remembers, per topic, the stream its messages go to on one host.
type streams struct {
	mu     sync.Mutex
	m      map[string]*streamState
	update chan struct{} // one slot: serialises changes of the named stream's subjects
}

// streamState is one topic's stream, once looked up (ready closed; err nil).
type streamState struct {
	topic  string
	name   string
	atomic bool          // the stream allows atomic batch publishes (PublishBatch as one unit)
	ready  chan struct{} // closed when the look-up ended
	err    error
}

// drop forgets topic's stream, so the next publish looks it up again (it was deleted, or the server
// lost it).
func (s *streams) drop(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.m[topic]; st != nil {
		select {
		case <-st.ready:
			delete(s.m, topic)
		default: // a look-up in progress is its own
		}
	}
}

// lookUpTimeout bounds a stream's look-up (and creation). The look-up is the publisher's, not its first
// caller's: a caller that leaves at its deadline neither fails the callers that joined it with its own
// timeout nor abandons a look-up slower than every caller's deadline (a stream created on a busy
// server), which the next caller would start again.
const lookUpTimeout = 10 * time.Second

// streamFor returns topic's stream on h, looking it up (and creating it when missing) on first use;
// concurrent first publishes wait, each under its own ctx, for the one look-up. A failed look-up is
// not kept.
func (p *Publisher) streamFor(ctx context.Context, h *hostConn, topic string) (*streamState, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, publishers.Wrap(publishers.ErrRejected, err)
	}
	h.streams.mu.Lock()
	st := h.streams.m[topic]
	if st == nil {
		if len(h.streams.m) >= maxStreams {
			h.streams.mu.Unlock()
			return nil, publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d]: %d topics in use, at most %d", h.host, len(h.streams.m), maxStreams))
		}
		st = &streamState{topic: topic, ready: make(chan struct{})}
		h.streams.m[topic] = st
		h.streams.mu.Unlock()
		if !p.goOwned(func() { p.runLookUp(h, st) }) {
			h.streams.mu.Lock()
			delete(h.streams.m, topic)
			h.streams.mu.Unlock()
			return nil, publishers.ErrClosed
		}
	} else {
		h.streams.mu.Unlock()
	}
	select {
	case <-st.ready:
	case <-ctx.Done():
		return nil, p.ended(ctx)
	case <-p.root.Done():
		return nil, publishers.ErrClosed
	}
	if st.err != nil {
		return nil, st.err
	}
	return st, nil
}

// readyStream is topic's stream when its look-up has succeeded already (nil otherwise): what an async
// publish may use without waiting.
func (h *hostConn) readyStream(topic string) *streamState {
	h.streams.mu.Lock()
	st := h.streams.m[topic]
	h.streams.mu.Unlock()
	if st == nil {
		return nil
	}
	select {
	case <-st.ready:
		if st.err == nil {
			return st
		}
	default:
	}
	return nil
}

// runLookUp looks st up within lookUpTimeout and Close, and publishes the outcome to its waiters.
func (p *Publisher) runLookUp(h *hostConn, st *streamState) {
	ctx, cancel := context.WithTimeout(p.root, lookUpTimeout)
	defer cancel()
	st.err = p.lookUp(ctx, h, st)
	if st.err != nil {
		h.streams.mu.Lock()
		delete(h.streams.m, st.topic)
		h.streams.mu.Unlock()
	}
	close(st.ready)
}

// lookUp finds the stream for st.topic, creating it when it does not exist: with nats.stream empty,
// named after the topic with subjects [topic]; otherwise nats.stream, to whose subjects the topic is
// added when none of them matches it (nats-server refuses a stream capturing every subject, ">",
// unless it acknowledges nothing). File storage, atomic batches allowed.
func (p *Publisher) lookUp(ctx context.Context, h *hostConn, st *streamState) error {
	cfg := jetstream.StreamConfig{Name: p.stream, Subjects: []string{st.topic}, Storage: jetstream.FileStorage, AllowAtomicPublish: true}
	if p.stream == "" {
		cfg.Name = StreamName(st.topic)
	} else {
		// one read-modify-write of the named stream's subjects at a time on this host
		select {
		case h.streams.update <- struct{}{}:
			defer func() { <-h.streams.update }()
		case <-ctx.Done():
			return p.lookUpErr(ctx, h, cfg.Name, ctx.Err())
		}
	}
	st.name = cfg.Name
	if api := "$JS.API.STREAM.INFO." + cfg.Name; h.perms.denied.Has(api) {
		return h.apiDenied(cfg.Name, api)
	}
	// A request the server refuses for want of permission gets no answer: the refusal, reported on
	// the connection, ends the look-up instead of its timeout.
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	defer h.perms.watch(func(v violation) {
		switch {
		case !v.subscribe && strings.HasPrefix(v.subject, "$JS.API.") && v.subject[strings.LastIndexByte(v.subject, '.')+1:] == cfg.Name:
			refuse(h.apiDenied(cfg.Name, v.subject))
		case v.subscribe && strings.HasPrefix(v.subject, "_INBOX."):
			refuse(h.unavailable(fmt.Errorf("stream %q: the server refused the subscription to %q, where JetStream's answers come (permissions violation): let the user subscribe to _INBOX.>", cfg.Name, v.subject)))
		}
	})()
	js, err := jetstream.New(h.nc)
	if err != nil {
		return h.unavailable(err)
	}
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // another client made it meanwhile
			s, err = js.Stream(ctx, cfg.Name)
		}
	}
	if err == nil && p.stream != "" && !matchesAny(s.CachedInfo().Config.Subjects, st.topic) {
		up := s.CachedInfo().Config
		if len(up.Subjects) >= maxStreams {
			return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: stream %q has %d subjects, at most %d", h.host, h.addr, cfg.Name, len(up.Subjects), maxStreams))
		}
		up.Subjects = append(up.Subjects, st.topic)
		s, err = js.UpdateStream(ctx, up)
	}
	if err != nil {
		return p.lookUpErr(ctx, h, cfg.Name, err)
	}
	info := s.CachedInfo()
	if !matchesAny(info.Config.Subjects, st.topic) {
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: stream %q exists with subjects %q, none of them %q (another topic maps to the same stream name)",
			h.host, h.addr, cfg.Name, info.Config.Subjects, st.topic))
	}
	st.atomic = info.Config.AllowAtomicPublish
	return nil
}

func (p *Publisher) lookUpErr(ctx context.Context, h *hostConn, stream string, err error) error {
	var apiErr *jetstream.APIError
	cause := context.Cause(ctx)
	switch {
	case p.root.Err() != nil:
		return publishers.ErrClosed
	case errors.Is(cause, publishers.ErrRejected), errors.Is(cause, publishers.ErrUnavailable): // refused (lookUp's watch)
		return cause
	case ctx.Err() != nil:
		return publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("nats.servers[%d] %s: stream %q: no answer within %v", h.host, h.addr, stream, lookUpTimeout))
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: %w (start nats-server with -js, or set nats.jetstream: false)", h.host, h.addr, err))
	case errors.As(err, &apiErr):
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: stream %q: %w", h.host, h.addr, stream, err))
	}
	return h.unavailable(fmt.Errorf("stream %q: %w", stream, err))
}

// matchesAny reports whether one of the subject patterns matches subject.
func matchesAny(patterns []string, subject string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return subjectMatches(p, subject) })
}

// subjectMatches reports whether pattern (tokens, '*' for one, '>' for the rest) matches subject.
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range pt {
		switch {
		case tok == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case tok != "*" && tok != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

// apiDenied is a look-up's error when the server refuses its JetStream API request.
func (h *hostConn) apiDenied(stream, subject string) error {
	return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: stream %q: the server refused the JetStream API request to %q: permissions violation (let the user publish to $JS.API.>, or to the stream's subjects under it)", h.host, h.addr, stream, subject))
}
