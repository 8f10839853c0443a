// Package embedded runs brokers inside the mqtarget process, so `go run ./cmd/mqtarget` works with no setup.
package embedded

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nsqio/nsq/nsqd"

	"github.com/mqtarget/mqtarget/internal/lograte"
)

// NSQD is a set of in-process nsqd instances listening on 127.0.0.1 ephemeral ports, with their data in
// one temporary directory that Close removes.
type NSQD struct {
	dir   string
	nodes []*nsqd.NSQD
	addrs []string
	wg    sync.WaitGroup
	once  sync.Once
	quit  chan struct{} // closed by Close: the disk watchers stop
	disk  []*diskWatch
}

// NSQDOptions configure the embedded nsqd instances.
type NSQDOptions struct {
	MaxMsgSize int64 // message size limit in bytes
	// MaxDisk bounds the bytes of messages each instance keeps on disk. nsqd keeps MemQueueSize messages
	// per topic and channel in memory and writes the rest to disk without a bound of its own, which a
	// load test without consumers fills; beyond MaxDisk the largest queues are emptied, with a warning.
	MaxDisk int64
	// MemQueueSize is nsqd's --mem-queue-size; 0: nsqd's default (10000).
	MemQueueSize int64
	// CheckEvery is how often the disk use is checked; 0: DefaultDiskCheck.
	CheckEvery time.Duration
}

// Defaults of NSQDOptions.
const (
	DefaultNSQDMaxDisk = 1 << 30
	DefaultDiskCheck   = time.Second
)

// StartNSQD starts n nsqd instances with the default disk bound. maxMsgSize is their message size
// limit in bytes.
func StartNSQD(n int, maxMsgSize int64, log *slog.Logger) (*NSQD, error) {
	return StartNSQDWith(n, NSQDOptions{MaxMsgSize: maxMsgSize, MaxDisk: DefaultNSQDMaxDisk}, log)
}

// StartNSQDWith starts n nsqd instances configured by o.
func StartNSQDWith(n int, o NSQDOptions, log *slog.Logger) (_ *NSQD, err error) {
	maxMsgSize := o.MaxMsgSize
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultDiskCheck
	}
	dir, err := os.MkdirTemp("", "mqtarget-nsqd-")
	if err != nil {
		return nil, fmt.Errorf("embedded nsqd: %w", err)
	}
	e := &NSQD{dir: dir, quit: make(chan struct{})}
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
		if o.MemQueueSize > 0 {
			opts.MemQueueSize = o.MemQueueSize
		}
		opts.LogLevel = 3 // warn; nsqd's lg package is internal, so the constant is spelled out
		opts.Logger = newNSQDLogger(log.With("component", "nsqd", "node", i))
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
		if o.MaxDisk > 0 {
			w := &diskWatch{node: node, dir: opts.DataPath, max: o.MaxDisk, log: log.With("component", "nsqd", "node", i)}
			e.disk = append(e.disk, w)
			e.wg.Go(func() { w.run(e.quit, o.CheckEvery) })
		}
		log.Info("embedded nsqd listening", "node", i, "tcp", node.RealTCPAddr().String(), "http", node.RealHTTPAddr().String())
	}
	return e, nil
}

// diskWatch keeps one nsqd's spilled messages under max bytes.
type diskWatch struct {
	node *nsqd.NSQD
	dir  string
	max  int64
	log  *slog.Logger
}

func (w *diskWatch) run(quit <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			w.check()
		}
	}
}

// check empties the largest queues until the node's queue files fit in max. A queue's files are named
// <topic>.diskqueue.NNNNNN.dat, or <topic>:<channel>.diskqueue… for a channel's.
func (w *diskWatch) check() {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return // the node is exiting
	}
	sizes := map[string]int64{}
	var total int64
	for _, de := range entries {
		queue, _, ok := strings.Cut(de.Name(), ".diskqueue.")
		if !ok || !strings.HasSuffix(de.Name(), ".dat") {
			continue
		}
		if fi, err := de.Info(); err == nil {
			sizes[queue] += fi.Size()
			total += fi.Size()
		}
	}
	if total <= w.max {
		return
	}
	queues := make([]string, 0, len(sizes))
	for q := range sizes {
		queues = append(queues, q)
	}
	slices.SortFunc(queues, func(a, b string) int { return cmp.Compare(sizes[b], sizes[a]) })
	before := total
	var emptied []string
	for _, q := range queues {
		if total <= w.max {
			break
		}
		if err := w.empty(q); err != nil {
			w.log.Warn("embedded nsqd over its disk budget: emptying a queue failed", "queue", q, "err", err)
			continue
		}
		total -= sizes[q]
		emptied = append(emptied, q)
	}
	w.log.Warn("embedded nsqd over its disk budget (nsq.embedded_max_disk): emptied its largest queues, their messages are lost",
		"disk_bytes", before, "max_bytes", w.max, "emptied", emptied)
}

// empty drops every message of a topic's or channel's queue, in memory and on disk.
func (w *diskWatch) empty(queue string) error {
	topicName, channelName, isChannel := strings.Cut(queue, ":")
	topic, err := w.node.GetExistingTopic(topicName)
	if err != nil {
		return err
	}
	if !isChannel {
		return topic.Empty()
	}
	ch, err := topic.GetExistingChannel(channelName)
	if err != nil {
		return err
	}
	return ch.Empty()
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
		close(e.quit)
		for _, n := range e.nodes {
			n.Exit()
		}
		e.wg.Wait()
		err = os.RemoveAll(e.dir)
	})
	return err
}

// nsqdLogger routes nsqd's log lines to slog, keeping nsqd's own level, rate-limited per cause
// (lograte): nsqd logs an error for every message it cannot write, so a full disk under load would
// log thousands of lines a second.
type nsqdLogger struct{ log *slog.Logger }

func newNSQDLogger(log *slog.Logger) nsqdLogger {
	return nsqdLogger{lograte.Logger(log, lograte.New(lograte.Interval))}
}

func (l nsqdLogger) Output(_ int, s string) error {
	level := slog.LevelWarn
	for prefix, lvl := range map[string]slog.Level{"DEBUG: ": slog.LevelDebug, "INFO: ": slog.LevelInfo, "WARNING: ": slog.LevelWarn, "ERROR: ": slog.LevelError, "FATAL: ": slog.LevelError} {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			level, s = lvl, rest
			break
		}
	}
	// Connections that end while nsqd exits are expected at shutdown, not errors worth a look.
	// The NSQ publisher learns nsqd's size limit by announcing a 2^31-1 byte PUB on a connection of its
	// own, once per nsqd (publishers/nsq.go, probeMaxMsgSize): nsqd's refusal of it is the answer, not an
	// error.
	if strings.Contains(s, "use of closed network connection") || strings.Contains(s, "message too big 2147483647 >") {
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, s)
	return nil
}
