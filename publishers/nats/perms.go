package nats

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/mqtarget/mqtarget/publishers"
)

// Permission violations. nats-server answers a PUB or SUB its user may not make with
// -ERR 'Permissions Violation for Publish to "x"' (or "for Subscription to"), drops it and keeps the
// connection: no PubAck comes, and a core NATS round trip succeeds all the same. nats.go records the
// -ERR as the connection's last error in its read loop, before what the server sent after it (the
// PONG of a round trip), and hands it to the ErrorHandler later, on its callback goroutine. So:
//   - JetStream: the ErrorHandler fails what is pending to that subject (ErrRejected, 502) instead
//     of letting it wait for its deadline;
//   - core NATS: after the round trip, a changed last error means a violation came before the PONG;
//     the publish waits for the ErrorHandler to have seen it and asks whether its subject was refused;
//   - either way a subject refused is remembered (publishers.Refusals: 10 s, at most 1024 per
//     server) and refused at once, without being sent, until then.

// violation is one permission violation the server reported.
type violation struct {
	subscribe bool   // a subscription refused, else a publish
	subject   string // the subject the server named
}

// parseViolation reads the violation nats.go reports as err (false: err is none, or its text is not
// nats-server's).
func parseViolation(err error) (violation, bool) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return violation{}, false
	}
	s := err.Error()
	for _, k := range []struct {
		words     string
		subscribe bool
	}{{"for Publish to ", false}, {"for Subscription to ", true}} {
		i := strings.Index(s, k.words)
		if i < 0 {
			continue
		}
		q, err := strconv.QuotedPrefix(s[i+len(k.words):])
		if err != nil {
			return violation{}, false
		}
		subject, err := strconv.Unquote(q)
		if err != nil || subject == "" {
			return violation{}, false
		}
		return violation{subscribe: k.subscribe, subject: subject}, true
	}
	return violation{}, false
}

// perms is what one connection learned of its user's permissions, and who waits for news of them.
type perms struct {
	denied publishers.Refusals // publish subjects refused

	mu       sync.Mutex
	watchers map[uint64]func(violation)
	nextW    uint64
	handled  error         // the last error the ErrorHandler has seen
	seen     chan struct{} // closed when handled changes
}

// watch calls f with each violation from now until stop is called.
func (ps *perms) watch(f func(violation)) (stop func()) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.watchers == nil {
		ps.watchers = map[uint64]func(violation){}
	}
	ps.nextW++
	id := ps.nextW
	ps.watchers[id] = f
	return func() {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		delete(ps.watchers, id)
	}
}

// saw records that the ErrorHandler has seen err (and every error before it: nats.go runs its
// callbacks in order), telling the violations' watchers first.
func (ps *perms) saw(err error, v *violation) {
	ps.mu.Lock()
	var ws []func(violation)
	if v != nil {
		for _, f := range ps.watchers {
			ws = append(ws, f)
		}
	}
	ps.mu.Unlock()
	for _, f := range ws {
		f(*v)
	}
	ps.mu.Lock()
	ps.handled = err
	if ps.seen != nil {
		close(ps.seen)
		ps.seen = nil
	}
	ps.mu.Unlock()
}

// awaitSeen waits under ctx until the ErrorHandler has seen nc's last error, or a later one.
func (ps *perms) awaitSeen(ctx context.Context, nc *nats.Conn) error {
	target := nc.LastError()
	for {
		ps.mu.Lock()
		if sameErr(ps.handled, target) {
			ps.mu.Unlock()
			return nil
		}
		if ps.seen == nil {
			ps.seen = make(chan struct{})
		}
		seen := ps.seen
		ps.mu.Unlock()
		if last := nc.LastError(); !sameErr(last, target) {
			target = last // an error after target: once it is seen, target was
			continue
		}
		select {
		case <-seen:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// onError is the connection's ErrorHandler's work: a refused publish fails what is pending to its
// subject, a refused reply subscription what is pending at all; watchers hear of either.
func (h *hostConn) onError(err error) {
	v, ok := parseViolation(err)
	if !ok {
		h.perms.saw(err, nil)
		return
	}
	switch {
	case !v.subscribe:
		h.perms.denied.Add(v.subject, "permissions violation")
		h.failWhere(func(w *waiting) bool { return w.subject == v.subject }, h.deniedErr(v.subject))
	case h.reply != "" && v.subject == h.reply+"*":
		msg := fmt.Sprintf("the server refused mqtarget's subscription to its reply subject %q (permissions violation): "+
			"JetStream's PubAcks cannot come back; let the user subscribe to _INBOX.>", v.subject)
		h.replyRefused.Store(&msg)
		h.failAll(h.replyErr())
	}
	h.perms.saw(err, &v)
}

// deniedErr is a publish's error when the server refuses its subject.
func (h *hostConn) deniedErr(subject string) error {
	return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("nats.servers[%d] %s: the server refused the publish to %q: permissions violation (the user may not publish to it)", h.host, h.addr, subject))
}

// refused is the error of a publish to subject known to be refused (nil: not known so).
func (h *hostConn) refused(subject string) error {
	if h.perms.denied.Has(subject) {
		return h.deniedErr(subject)
	}
	if h.replyRefused.Load() != nil {
		return h.replyErr()
	}
	return nil
}

// replyErr is a JetStream publish's error while the reply subscription is refused (nil if it is not).
func (h *hostConn) replyErr() error {
	msg := h.replyRefused.Load()
	if msg == nil {
		return nil
	}
	return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("nats.servers[%d] %s: %s", h.host, h.addr, *msg))
}

// roundTripMark is what a core NATS publish notes before it is written, to tell afterwards whether
// the server reported a violation before the round trip's PONG.
type roundTripMark struct {
	last       error
	reconnects uint64
}

func (h *hostConn) mark() roundTripMark {
	return roundTripMark{last: h.nc.LastError(), reconnects: h.nc.Stats().Reconnects}
}

// refusedSince is a core NATS publish's outcome after its round trip succeeded: nil when the server
// refused nothing before the PONG, the refusal when it refused subject. nats.go's last error changes
// with each violation (each a new error value) and goes back only to nil, when the connection is
// lost: an unchanged last error on the same connection means no violation came.
func (h *hostConn) refusedSince(ctx context.Context, subject string, m roundTripMark) error {
	last := h.nc.LastError()
	if !sameErr(last, m.last) {
		if err := h.perms.awaitSeen(ctx, h.nc); err != nil {
			return err
		}
		if h.perms.denied.Has(subject) {
			return h.deniedErr(subject)
		}
	}
	if last == nil && (!h.nc.IsConnected() || h.nc.Stats().Reconnects != m.reconnects) {
		return h.unavailable(errors.New("the connection was lost right after the round trip: whether the server refused the message is unknown"))
	}
	return nil
}

// sameErr reports whether a and b are the same error value; == on errors whose dynamic type is not
// comparable would panic.
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}
