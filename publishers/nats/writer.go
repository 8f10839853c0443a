package nats

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/mqtarget/mqtarget/publishers"
)

// outQueue bounds the writes queued per host for its writer: a publish finds room or waits for it
// under its own context (PublishAsync refuses instead).
const outQueue = 1024

// outJob is one call's messages for a host's writer, in order. A JetStream job carries the tokens
// registered for its answers: a job none of whose tokens is pending any more (its caller left, or Close
// failed it) is not written. written, when set, hears the outcome of the writes (core NATS, which has
// no answers to register).
type outJob struct {
	msgs    []*nats.Msg
	tokens  []uint64
	written func(error)
}

// The writer exists because nats.go writes under its connection's lock: a publish that calls
// PublishMsg on its caller's goroutine waits for that lock without regard to its context, and nats.go
// holds it across network I/O (its flusher writing to a frozen server's full socket, up to
// flusherTimeout; a reconnect's dial and handshake, up to twice dial_timeout). On the writer's
// goroutine those waits hold the writer, and the caller leaves at its deadline.

// enqueue hands j to h's writer, waiting for room under ctx (nil: refuse when full). After Close it
// fails with ErrClosed; a job that got in is written or failed by the writer or by Close.
func (p *Publisher) enqueue(ctx context.Context, h *hostConn, j outJob) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return publishers.ErrClosed
	}
	p.sending.Add(1) // Close waits for enqueues in progress before the writers drain their queues
	p.mu.Unlock()
	defer p.sending.Done()
	if ctx == nil {
		select {
		case h.out <- j:
			return nil
		default:
			return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: %d writes queued, the most allowed", h.host, h.addr, outQueue))
		}
	}
	select {
	case h.out <- j:
		return nil
	case <-ctx.Done():
		return p.ended(ctx)
	case <-p.root.Done():
		return publishers.ErrClosed
	}
}

// writeLoop is h's writer, until Close: it writes each job's messages, in order. Close drains what is
// left once no enqueue is in progress.
func (p *Publisher) writeLoop(h *hostConn) {
	for {
		select {
		case j := <-h.out:
			if p.root.Err() != nil {
				j.fail(h, publishers.ErrClosed)
				continue
			}
			h.write(j)
		case <-h.quit:
			for {
				select {
				case j := <-h.out:
					j.fail(h, publishers.ErrClosed)
				default:
					return
				}
			}
		}
	}
}

// write publishes j's messages. A failure fails what was not written: each token from the message
// that failed on (what was written before is answered, or times out, as registered).
func (h *hostConn) write(j outJob) {
	if j.tokens != nil && !h.anyPending(j.tokens) {
		return // its caller left before it was written: never sent
	}
	for i, m := range j.msgs {
		if err := h.nc.PublishMsg(m); err != nil {
			err = h.publishErr(err)
			if j.tokens != nil {
				h.failTokens(j.tokens[min(i, len(j.tokens)-1):], err)
			}
			if j.written != nil {
				j.written(err)
			}
			return
		}
	}
	if j.written != nil {
		j.written(nil)
	}
}

// fail ends a job that is not written.
func (j outJob) fail(h *hostConn, err error) {
	h.failTokens(j.tokens, err)
	if j.written != nil {
		j.written(err)
	}
}

// anyPending reports whether one of tokens still awaits its answer.
func (h *hostConn) anyPending(tokens []uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range tokens {
		if h.pending[t] != nil {
			return true
		}
	}
	return false
}

// failTokens fails each of tokens still pending with err.
func (h *hostConn) failTokens(tokens []uint64, err error) {
	for _, t := range tokens {
		if w := h.claim(t); w != nil {
			w.done(err)
		}
	}
}

// goOwned runs f on a goroutine Close waits for (after it closed the connections); false after Close.
func (p *Publisher) goOwned(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		f()
	}()
	return true
}

// flushOwned is flush on an owned goroutine (nats.go takes its connection's lock to send the PING),
// waited for under ctx.
func (p *Publisher) flushOwned(ctx context.Context, h *hostConn) error {
	res := make(chan error, 1)
	fctx, cancel := p.scope(ctx)
	if !p.goOwned(func() { defer cancel(); res <- flush(fctx, h.nc) }) {
		cancel()
		return publishers.ErrClosed
	}
	select {
	case err := <-res:
		if err != nil {
			if fctx.Err() != nil {
				return p.ended(ctx)
			}
			return h.unavailable(err)
		}
		return nil
	case <-ctx.Done():
		return p.ended(ctx)
	case <-p.root.Done():
		return publishers.ErrClosed
	}
}
