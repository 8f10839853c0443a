package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embeddedReady bounds an embedded server's start (it is ready in milliseconds).
const embeddedReady = 10 * time.Second

// maxEmbeddedPayload is the largest max_payload an embedded server is given (nats-server's own limit is
// 64 MiB; more than 8 MiB it warns about).
const maxEmbeddedPayload = 8 << 20

// EmbeddedPayload is the max_payload an embedded server needs for messages of maxMessage bytes: room
// for the JetStream batch headers on top, at least nats-server's 1 MiB default, at most 8 MiB.
func EmbeddedPayload(maxMessage int) int32 {
	return int32(min(max(maxMessage+4<<10, 1<<20), maxEmbeddedPayload))
}

// EmbeddedOptions configure the in-process servers.
type EmbeddedOptions struct {
	// MaxStore bounds each server's JetStream file store (nats.embedded_max_store).
	MaxStore int64
	// MaxPayload is each server's max_payload, the largest message it takes; 0: nats-server's 1 MiB.
	MaxPayload int32
}

// Embedded are running in-process nats-servers.
type Embedded struct {
	mu      sync.Mutex
	servers []*server.Server
	dirs    []string
	addrs   []string
}

// StartEmbedded starts n in-process nats-servers with JetStream on, each listening on an ephemeral
// port of 127.0.0.1 and storing in a temporary directory of its own (removed by Close), at most
// o.MaxStore bytes of it. They are independent servers (no cluster): host k is server k.
func StartEmbedded(n int, o EmbeddedOptions, log *slog.Logger) (*Embedded, error) {
	if n < 1 || n > maxEmbedded {
		return nil, fmt.Errorf("nats.embedded: must be 1..%d, got %d", maxEmbedded, n)
	}
	if o.MaxStore < minEmbeddedStore || o.MaxStore > maxEmbeddedStore {
		return nil, fmt.Errorf("nats.embedded_max_store: must be %d..%d, got %d", int64(minEmbeddedStore), int64(maxEmbeddedStore), o.MaxStore)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Embedded{}
	for i := range n {
		dir, err := os.MkdirTemp("", "mqtarget-nats-")
		if err != nil {
			_ = e.Close()
			return nil, err
		}
		e.dirs = append(e.dirs, dir)
		s, err := server.NewServer(&server.Options{
			ServerName:         "mqtarget-" + strconv.Itoa(i),
			Host:               "127.0.0.1",
			Port:               server.RANDOM_PORT,
			HTTPPort:           0, // no monitoring listener
			NoSigs:             true,
			NoLog:              true,
			MaxPayload:         o.MaxPayload,
			JetStream:          true,
			StoreDir:           dir,
			JetStreamMaxStore:  o.MaxStore,
			JetStreamMaxMemory: 64 << 20, // memory streams are not used; bound them anyway
		})
		if err != nil {
			_ = e.Close()
			return nil, fmt.Errorf("embedded nats-server %d: %w", i, err)
		}
		e.servers = append(e.servers, s)
		s.Start()
		if !s.ReadyForConnections(embeddedReady) {
			_ = e.Close()
			return nil, fmt.Errorf("embedded nats-server %d: not ready within %v", i, embeddedReady)
		}
		if !s.JetStreamEnabled() {
			_ = e.Close()
			return nil, fmt.Errorf("embedded nats-server %d: JetStream did not start", i)
		}
		e.addrs = append(e.addrs, s.Addr().String())
		log.Info("embedded nats-server started", "addr", s.Addr().String(), "store", dir, "max_store", o.MaxStore)
	}
	return e, nil
}

// Addrs are the servers' client addresses (host:port), in start order.
func (e *Embedded) Addrs() []string { return e.addrs }

// Version is the embedded servers' version ("nats-server 2.15.2").
func (e *Embedded) Version() string { return "nats-server " + server.VERSION }

// Server returns server i, for tests that stop one (Shutdown) or read its JetStream state.
func (e *Embedded) Server(i int) *server.Server { return e.servers[i] }

// Close shuts the servers down, waits for them and removes their stores. It is idempotent.
func (e *Embedded) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.servers {
		s.Shutdown()
		s.WaitForShutdown()
	}
	var errs []error
	for _, d := range e.dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	e.servers, e.dirs = nil, nil
	return errors.Join(errs...)
}
