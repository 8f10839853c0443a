package publishers

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/mqtarget/mqtarget/publishers/wire"
)

// ProtocolErrorCounter is implemented by the publishers that read their brokers' answers themselves:
// how many times a host's broker sent what no correct
// broker sends (a malformed or unexpected frame, an answer to nothing outstanding, to a command not yet
// written, or twice). Each closed the connection and failed what was pending on it as unavailable.
// A publisher over a client library that reads its answers itself counts none.
type ProtocolErrorCounter interface {
	ProtocolErrors(host int) uint64
}

// ProtocolErrors counts one publisher's protocol violations per host address and logs the first of each
// host: a broker that misbehaves does so on every connection, and each is closed and redialled.
type ProtocolErrors struct {
	broker string
	hosts  []string
	by     map[string]*protocolHost // by address; fixed at construction, so read without a lock
	log    *slog.Logger
}

type protocolHost struct {
	n      atomic.Uint64
	logged atomic.Bool
}

// NewProtocolErrors counts for hosts (addresses as connections dial them); log may be nil.
func NewProtocolErrors(broker string, hosts []string, log *slog.Logger) *ProtocolErrors {
	e := &ProtocolErrors{broker: broker, hosts: hosts, by: make(map[string]*protocolHost, len(hosts)), log: log}
	for _, h := range hosts {
		if e.by[h] == nil {
			e.by[h] = &protocolHost{}
		}
	}
	return e
}

// Hook is the wire.Config.ProtocolError of a connection to addr.
func (e *ProtocolErrors) Hook(addr string) func(error) {
	return func(err error) { e.Count(addr, err) }
}

// Count records a violation of addr's broker; an address not configured is counted nowhere but logged.
func (e *ProtocolErrors) Count(addr string, err error) {
	h := e.by[addr]
	if h != nil {
		h.n.Add(1)
	}
	if e.log == nil || (h != nil && h.logged.Swap(true)) {
		return
	}
	e.log.Warn(e.broker+" broker broke the protocol: connection closed, what was pending on it failed as unavailable "+
		"(logged once per host; mqtarget_protocol_errors_total counts them)", "addr", addr, "err", err)
}

// Get returns the count of the host at index i.
func (e *ProtocolErrors) Get(i int) uint64 {
	if i < 0 || i >= len(e.hosts) {
		return 0
	}
	return e.by[e.hosts[i]].n.Load()
}

// ProtocolError wraps wire.ErrProtocol with what the broker did, for the readers outside the
// connection core (handshakes, consumers).
func ProtocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", wire.ErrProtocol, fmt.Sprintf(format, args...))
}

// IsProtocolError reports whether err is a protocol violation.
func IsProtocolError(err error) bool { return errors.Is(err, wire.ErrProtocol) }

// SendRefused is the error of a Send its connection refused because it broke or is being replaced
// (closing) after the caller picked it: the broker's unavailability (503, retried where retries are
// safe), not ErrClosed, which means mqtarget is shutting down, unless the publisher is closed. A broker
// that breaks the protocol makes this common: every violation replaces a connection.
func SendRefused(publisherClosed bool, err error) error {
	if err != nil && errors.Is(err, ErrClosed) && !publisherClosed {
		return Wrap(ErrUnavailable, fmt.Errorf("connection replaced: %v", err))
	}
	return err
}

// NoEOF turns an EOF inside a frame into io.ErrUnexpectedEOF.
func NoEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Truncate shortens what a hostile broker sent for an error message.
func Truncate(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return strconv.Quote(string(b))
}
