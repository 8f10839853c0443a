// Package embedded runs brokers inside the mqtarget process, so `go run ./cmd/mqtarget` works with no setup.
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nsqio/nsq/nsqd"
)

// NSQD is a set of in-process nsqd instances listening on 127.0.0.1 ephemeral ports, with their data in
// one temporary directory that Close removes.
type NSQD struct {
	dir   string
	nodes []*nsqd.NSQD
	addrs []string
	wg    sync.WaitGroup
	once  sync.Once
}

// StartNSQD starts n nsqd instances. maxMsgSize is their message size limit in bytes.
func StartNSQD(n int, maxMsgSize int64, log *slog.Logger) (_ *NSQD, err error) {
	dir, err := os.MkdirTemp("", "mqtarget-nsqd-")
	if err != nil {
		return nil, fmt.Errorf("embedded nsqd: %w", err)
	}
	e := &NSQD{dir: dir}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	for i := range n {
		opts := nsqd.NewOptions()
		opts.ID = int64(i)
		opts.TCPAddress = "127.0.0.1:0"
		opts.HTTPAddress = "127.0.0.1:0"
		opts.HTTPSAddress = ""
		opts.BroadcastAddress = "127.0.0.1"
		opts.DataPath = filepath.Join(dir, fmt.Sprint(i))
		opts.MaxMsgSize = maxMsgSize
		// An MPUB of two maximal messages plus framing must fit too.
		opts.MaxBodySize = max(opts.MaxBodySize, 2*maxMsgSize+64)
		opts.LogLevel = 3 // warn; nsqd's lg package is internal, so the constant is spelled out
		opts.Logger = nsqdLogger{log.With("component", "nsqd", "node", i)}
		if err := os.MkdirAll(opts.DataPath, 0o700); err != nil {
			return nil, fmt.Errorf("embedded nsqd %d: %w", i, err)
		}
		node, err := nsqd.New(opts)
		if err != nil {
			return nil, fmt.Errorf("embedded nsqd %d: %w", i, err)
		}
		e.nodes = append(e.nodes, node)
		e.addrs = append(e.addrs, node.RealTCPAddr().String())
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := node.Main(); err != nil {
				log.Error("embedded nsqd stopped", "node", i, "err", err)
			}
		}()
		log.Info("embedded nsqd listening", "node", i, "tcp", node.RealTCPAddr().String(), "http", node.RealHTTPAddr().String())
	}
	return e, nil
}

// TCPAddrs returns the nsqd TCP addresses, for nsq.hosts.
func (e *NSQD) TCPAddrs() []string { return e.addrs }

// HTTPAddrs returns the nsqd HTTP addresses (stats, /pub).
func (e *NSQD) HTTPAddrs() []string {
	out := make([]string, len(e.nodes))
	for i, n := range e.nodes {
		out[i] = n.RealHTTPAddr().String()
	}
	return out
}

// Close stops every instance and removes the data directory. It is idempotent.
func (e *NSQD) Close() error {
	var err error
	e.once.Do(func() {
		for _, n := range e.nodes {
			n.Exit()
		}
		e.wg.Wait()
		err = os.RemoveAll(e.dir)
	})
	return err
}

// nsqdLogger routes nsqd's log lines to slog, keeping nsqd's own level.
type nsqdLogger struct{ log *slog.Logger }

func (l nsqdLogger) Output(_ int, s string) error {
	level := slog.LevelWarn
	for prefix, lvl := range map[string]slog.Level{"DEBUG: ": slog.LevelDebug, "INFO: ": slog.LevelInfo, "WARNING: ": slog.LevelWarn, "ERROR: ": slog.LevelError, "FATAL: ": slog.LevelError} {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			level, s = lvl, rest
			break
		}
	}
	// Connections that end while nsqd exits are expected at shutdown, not errors worth a look.
	if strings.Contains(s, "use of closed network connection") {
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, s)
	return nil
}
