package kafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqtarget/mqtarget/publishers"
)

// connCounts are one broker's connection set-ups. franz-go keeps several connections per broker
// (produce, fetch, group, other requests) and closes idle ones after 30 s: a connection made after
// one of that broker's closed counts as a reopen, whatever closed it.
type connCounts struct {
	opened, reopened, failed atomic.Uint64
	lost                     atomic.Int64 // closes not yet followed by a new connection
}

// connHook counts the client's connections per broker (kgo.HookBrokerConnect, HookBrokerDisconnect).
type connHook cluster

// hostTable maps broker addresses to hosts; set once the brokers are known (the hook runs before).
type hostTable struct {
	index map[string]int
	conns []connCounts
}

func (h *connHook) host(m kgo.BrokerMetadata) (*connCounts, bool) {
	t := h.table.Load()
	if t == nil {
		return nil, false
	}
	i, ok := t.index[net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))]
	if !ok {
		return nil, false
	}
	return &t.conns[i], true
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h *connHook) OnBrokerConnect(m kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	c, ok := h.host(m)
	if !ok {
		return // a bootstrap address before the brokers were known
	}
	if errors.Is(err, errPingRedial) {
		return // no dial: a ping's retry refused (oneDialKey)
	}
	if err != nil {
		c.failed.Add(1)
		if f := h.lost.Load(); f != nil {
			if i := h.hostOf(m); i >= 0 {
				(*f)(i, fmt.Errorf("dial: %w", err)) // a dead broker: its publishes fail now, not at their deadline
			}
		}
		return
	}
	c.opened.Add(1)
	for {
		n := c.lost.Load()
		if n <= 0 {
			return
		}
		if c.lost.CompareAndSwap(n, n-1) {
			c.reopened.Add(1)
			return
		}
	}
}

// OnBrokerDisconnect implements kgo.HookBrokerDisconnect.
func (h *connHook) OnBrokerDisconnect(m kgo.BrokerMetadata, _ net.Conn) {
	if c, ok := h.host(m); ok {
		c.lost.Add(1)
	}
}

// OnBrokerE2E implements kgo.HookBrokerE2E: a produce request whose connection failed (written or
// answered wrongly, closed under it) fails the publishes pending on that broker at once as unavailable,
// as the other brokers' connections do, instead of leaving them to their deadline while franz-go
// retries on a new connection.
func (h *connHook) OnBrokerE2E(m kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	err := e2e.WriteErr
	if err == nil {
		err = e2e.ReadErr
	}
	if key != kmsg.Produce.Int16() || !brokerFailure(err) {
		return
	}
	if f := h.lost.Load(); f != nil {
		if i := h.hostOf(m); i >= 0 {
			(*f)(i, err)
		}
	}
}

// brokerFailure reports whether err is the connection's own failure: the peer closed or reset it, the
// network failed, or the checker found a stray answer. Not franz-go closing a connection itself (to
// abandon a request: errChosenBrokerDead) nor a context ending.
func brokerFailure(err error) bool {
	var op *net.OpError
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errStray) ||
		errors.As(err, &op) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// hostOf is the host index of m's broker; -1 when it is none of the hosts.
func (h *connHook) hostOf(m kgo.BrokerMetadata) int {
	if t := h.table.Load(); t != nil {
		if i, ok := t.index[net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))]; ok {
			return i
		}
	}
	return -1
}

// ConnCounts is host's connection set-ups since the client started (publishers.ConnCounter).
func (k *cluster) ConnCounts(host int) publishers.ConnCounts {
	t := k.table.Load()
	if t == nil || host < 0 || host >= len(t.conns) {
		return publishers.ConnCounts{}
	}
	c := &t.conns[host]
	return publishers.ConnCounts{Opened: c.opened.Load(), Reopened: c.reopened.Load(), DialFailures: c.failed.Load()}
}

// connEvents is news about host's connections, for publishers.PingLimit: it changes with every
// connection set up or dial failed (what ConnCounts counts), so a ping after a publish met a dead or
// recovered broker checks again instead of reusing the last result.
func (k *cluster) connEvents(host int) uint64 {
	c := k.ConnCounts(host)
	return c.Opened + c.Reopened + c.DialFailures
}
