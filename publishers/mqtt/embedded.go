package mqtt

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// EmbeddedOptions bound the in-process servers.
type EmbeddedOptions struct {
	// MaxMessageSize is the largest payload a server takes (message.max_size); PUBLISH packets beyond it
	// and its topic are refused by the server's Maximum Packet Size, which CONNACK announces, so the
	// publisher refuses them first (413).
	MaxMessageSize int

	connectWait time.Duration // for a connection's CONNECT; 0: embeddedConnectWait (tests: shorter)
}

// Memory bounds of an embedded server: what it holds is at most embeddedClients connections times
// (embeddedPending + embeddedInflight) packets of at most the maximum packet size each. Nothing is kept
// for a topic without subscribers, no session outlives its connection, nothing is retained. A
// subscriber more than embeddedPending messages behind, or with embeddedInflight unacknowledged, loses
// what comes next (mochi-mqtt drops it, as mosquitto does past max_queued_messages): with 256 in
// flight a conformance run's subscriber lost 1 to 155 of about 1000 messages published in a burst
// (mochi counted them in Info.InflightDropped).
const (
	embeddedClients  = 64
	embeddedPending  = 8192 // packets queued for writing to one client (mochi-mqtt's default)
	embeddedInflight = 8192 // QoS 1/2 packets to one client not yet acknowledged (mochi-mqtt's default)
	embeddedReceive  = 1024 // QoS 1/2 packets from one client not yet acknowledged (Receive Maximum; mochi-mqtt's default)
	maxTopicOverhead = MaxTopicLen + 16
)

// Embedded are running in-process mochi-mqtt servers on 127.0.0.1.
type Embedded struct {
	servers []*mochi.Server
	lns     []*boundedListener // servers[i] listens through lns[i]
	addrs   []string
	once    sync.Once
	err     error // of the first Close
}

// StartEmbedded starts n mochi-mqtt servers, each on its own ephemeral port of 127.0.0.1, accepting
// every client (no authentication), MQTT 5 and 3.1.1.
func StartEmbedded(n int, o EmbeddedOptions, log *slog.Logger) (*Embedded, error) {
	return startEmbedded(n, o, func() mochi.Hook { return new(auth.AllowHook) }, log)
}

// startEmbedded starts the servers with the authentication and ACL hook authHook makes (tests: one that
// refuses some publishes).
func startEmbedded(n int, o EmbeddedOptions, authHook func() mochi.Hook, log *slog.Logger) (*Embedded, error) {
	if n < 1 || n > maxEmbedded {
		return nil, fmt.Errorf("mqtt.embedded: must be 1..%d, got %d", maxEmbedded, n)
	}
	if o.MaxMessageSize < 1 {
		return nil, fmt.Errorf("mqtt: embedded servers need a maximum message size, got %d", o.MaxMessageSize)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Embedded{}
	for i := range n {
		caps := mochi.NewDefaultServerCapabilities()
		caps.MaximumClients = embeddedClients
		caps.MaximumClientWritesPending = embeddedPending
		caps.MaximumInflight = embeddedInflight
		caps.ReceiveMaximum = embeddedReceive
		caps.MaximumSessionExpiryInterval = 0
		caps.MaximumMessageExpiryInterval = 60
		caps.MaximumPacketSize = uint32(min(o.MaxMessageSize+maxTopicOverhead, 256<<20))
		caps.RetainAvailable = 0
		srv := mochi.New(&mochi.Options{Capabilities: caps, Logger: log.With("mqtt_embedded", i)})
		if err := srv.AddHook(authHook(), nil); err != nil {
			return nil, errors.Join(err, e.Close())
		}
		if err := srv.AddHook(new(noSendQuota), nil); err != nil { // mochi's deadlock: embedded_quota.go
			return nil, errors.Join(err, e.Close())
		}
		nl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(fmt.Errorf("mqtt: embedded server %d: %w", i, err), e.Close())
		}
		wait := o.connectWait
		if wait <= 0 {
			wait = embeddedConnectWait
		}
		bl := newBoundedListener(nl, embeddedConns, wait) // embedded_listener.go
		l := listeners.NewNet("mqtarget-"+strconv.Itoa(i), bl)
		if err := srv.AddListener(l); err != nil {
			_ = nl.Close()
			return nil, errors.Join(fmt.Errorf("mqtt: embedded server %d: %w", i, err), e.Close())
		}
		if err := srv.Serve(); err != nil {
			_ = srv.Close()
			return nil, errors.Join(fmt.Errorf("mqtt: embedded server %d: %w", i, err), e.Close())
		}
		e.servers = append(e.servers, srv)
		e.lns = append(e.lns, bl)
		e.addrs = append(e.addrs, l.Address())
	}
	return e, nil
}

// Addrs are the servers' addresses, host:port, in start order.
func (e *Embedded) Addrs() []string { return e.addrs }

// Version is the embedded servers' version, as GET / shows it.
func (e *Embedded) Version() string { return "mochi-mqtt " + mochi.Version }

// Close stops every server; it is idempotent.
func (e *Embedded) Close() error {
	e.once.Do(func() {
		done := make(chan struct{})
		go func() { // owned: waited for below, or left behind on purpose (see closeWait)
			defer close(done)
			for i, s := range e.servers {
				closeServer(s, e.lns[i])
			}
		}()
		select {
		case <-done:
		case <-time.After(closeWait):
			e.err = fmt.Errorf("embedded mochi-mqtt servers did not close within %v (a server hangs: docs/mqtt.md); their goroutines are left behind", closeWait)
		}
	})
	return e.err
}

// closeServer closes s, which listens through l, so that nothing can hang mochi-mqtt v2.7.9's Close: it
// lists the listener's clients under the clients' read lock taken twice (Clients.GetByListener calls
// Len), and a client added or removed in between waits for the write lock and blocks both for ever
// (stop 25's landing CI). So before it runs there must be no client left to add or remove: no connections,
// every connection's goroutine ended, the clients' map empty. Clients see their connection end, where
// mochi's Close would have sent DISCONNECT (server shutting down) first.
func closeServer(s *mochi.Server, l *boundedListener) {
	_ = l.Close() // no new connection; every open one closed, so each client's goroutine ends
	// Every connection handed to mochi has been read from, so its goroutine counted itself in ClientsWg
	// (mochi adds to it before the first read): waiting on it now cannot race with that Add.
	l.waitRead()
	s.Listeners.ClientsWg.Wait()
	for id := range s.Clients.GetAll() { // clients whose goroutine ended without removing them
		s.Clients.Delete(id)
	}
	_ = s.Close()
}

// closeWait bounds Close: mqtarget's shutdown must end even when a mochi server hangs (noSendQuota
// keeps it from the deadlock known; this is for any other).
const closeWait = 5 * time.Second
