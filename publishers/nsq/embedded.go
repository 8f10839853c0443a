// Package embedded runs brokers inside the mqtarget process, so `go run ./cmd/mqtarget` works with no setup.
package nsq

import (
	"cmp"
	"context"
	"errors"
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
	lock  *os.File // held while the directory is in use
	nodes []*nsqd.NSQD
	addrs []string
	wg    sync.WaitGroup
	once  sync.Once
	quit  chan struct{} // closed by Close: the disk watchers stop
	disk  []*diskWatch
	mem   []*memWatch
}

// NSQDOptions configure the embedded nsqd instances.
type NSQDOptions struct {
	MaxMsgSize int64 // message size limit in bytes
	// MaxDisk bounds the bytes of messages each instance keeps on disk. nsqd keeps MemQueueSize messages
	// per topic and channel in memory and writes the rest to disk without a bound of its own, which a
	// load test without consumers fills; beyond MaxDisk the largest queues are emptied, with a warning.
	MaxDisk int64
	// MaxMemory bounds the bytes of messages each instance keeps in its in-memory queues, all topics and
	// channels together. nsqd counts its queues in messages (--mem-queue-size, 10000 per topic and per
	// channel by default), so a client choosing the message size and the number of topics would multiply
	// that at will. Each queue therefore holds at most MaxMemory / MaxMsgSize messages (1..10000; past
	// them a topic's or durable channel's messages go to disk), and every MemCheckEvery the queues' bytes
	// in memory are added up (at each topic's message size of late) and, beyond MaxMemory, the fullest
	// queues are emptied, with a warning. 0: nsqd's --mem-queue-size and no memory bound.
	MaxMemory int64
	// MemCheckEvery is how often the memory use is checked; 0: DefaultMemCheck.
	MemCheckEvery time.Duration
	// CheckEvery is how often the disk use is checked; 0: DefaultDiskCheck.
	CheckEvery time.Duration
}

// Defaults of NSQDOptions.
const (
	DefaultNSQDMaxDisk = 1 << 30
	DefaultDiskCheck   = time.Second
	// The memory check is cheap (nsqd's counters) and memory fills faster than disk: what arrives
	// within it is the bound's overshoot.
	DefaultMemCheck = 100 * time.Millisecond
)

// StartNSQD starts n nsqd instances with the default disk bound and no in-memory queues. maxMsgSize is
// their message size limit in bytes.
func StartNSQD(n int, maxMsgSize int64, log *slog.Logger) (*NSQD, error) {
	return StartNSQDWith(n, NSQDOptions{MaxMsgSize: maxMsgSize, MaxDisk: DefaultNSQDMaxDisk}, log)
}

// StartNSQDWith starts n nsqd instances configured by o.
func StartNSQDWith(n int, o NSQDOptions, log *slog.Logger) (_ *NSQD, err error) {
	maxMsgSize := o.MaxMsgSize
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultDiskCheck
	}
	if o.MemCheckEvery <= 0 {
		o.MemCheckEvery = DefaultMemCheck
	}
	removeStaleDirs(os.TempDir(), log)
	dir, lock, err := makeDataDir(os.TempDir())
	if err != nil {
		return nil, fmt.Errorf("embedded nsqd: %w", err)
	}
	e := &NSQD{dir: dir, lock: lock, quit: make(chan struct{})}
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
		if o.MaxMemory > 0 {
			opts.MemQueueSize = o.memQueueSize()
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
			e.wg.Go(func() { repeat(e.quit, o.CheckEvery, w.check) })
		}
		if o.MaxMemory > 0 {
			w := &memWatch{node: node, max: o.MaxMemory, log: log.With("component", "nsqd", "node", i), topics: map[string]topicSize{}}
			e.mem = append(e.mem, w)
			e.wg.Go(func() { repeat(e.quit, o.MemCheckEvery, w.check) })
		}
		log.Info("embedded nsqd listening", "node", i, "tcp", node.RealTCPAddr().String(), "http", node.RealHTTPAddr().String())
	}
	return e, nil
}

// memQueueSize is nsqd's --mem-queue-size for o: one queue of the largest messages fits MaxMemory. At
// least 1, so an ephemeral channel (no disk queue: nsqd drops what its memory cannot take) can hand a
// message to a consumer that is momentarily busy.
func (o NSQDOptions) memQueueSize() int64 {
	const nsqdDefault = 10000
	return min(max(o.MaxMemory/max(o.MaxMsgSize, 1), 1), nsqdDefault)
}

// memWatch keeps the messages one nsqd holds in memory under max bytes. nsqd tells each queue's count
// in memory (depth minus disk depth) and each topic's bytes and messages so far; the bytes per message
// of a topic are those of the messages since the last check, and the largest seen while the topic had
// messages in memory, so a topic filled with large messages and then sent small ones is not undercounted.
type memWatch struct {
	node     *nsqd.NSQD
	max      int64
	log      *slog.Logger
	topics   map[string]topicSize
	lastWarn time.Time
	emptied  map[string]int // since the last warning
}

type topicSize struct {
	count, bytes uint64  // the topic's counters at the last check
	per          float64 // bytes per message, the largest recent
}

// memQueue is one topic's or channel's in-memory queue, by its estimated bytes.
type memQueue struct {
	topic, channel string // channel "": the topic's own queue
	bytes          int64
}

func (w *memWatch) check() {
	var queues []memQueue
	var total int64
	seen := make(map[string]bool, len(w.topics))
	for _, ts := range w.node.GetStats("", "", false).Topics {
		seen[ts.TopicName] = true
		sz := w.topics[ts.TopicName]
		inMemory := ts.Depth - ts.BackendDepth
		for _, cs := range ts.Channels {
			inMemory += cs.Depth - cs.BackendDepth
		}
		if inMemory == 0 {
			sz.per = 0 // nothing held: the next messages set the size afresh
		}
		if n := ts.MessageCount - sz.count; n > 0 && ts.MessageBytes >= sz.bytes {
			sz.per = max(sz.per, float64(ts.MessageBytes-sz.bytes)/float64(n))
		}
		sz.count, sz.bytes = ts.MessageCount, ts.MessageBytes
		w.topics[ts.TopicName] = sz
		add := func(channel string, n int64) {
			if b := int64(float64(n) * sz.per); b > 0 {
				queues = append(queues, memQueue{ts.TopicName, channel, b})
				total += b
			}
		}
		add("", ts.Depth-ts.BackendDepth)
		for _, cs := range ts.Channels {
			add(cs.ChannelName, cs.Depth-cs.BackendDepth)
		}
	}
	for name := range w.topics {
		if !seen[name] {
			delete(w.topics, name) // deleted topics
		}
	}
	if total <= w.max {
		return
	}
	slices.SortFunc(queues, func(a, b memQueue) int { return cmp.Compare(b.bytes, a.bytes) })
	before := total
	for _, q := range queues {
		if total <= w.max {
			break
		}
		if err := emptyQueue(w.node, q.topic, q.channel); err != nil {
			continue // deleted meanwhile
		}
		total -= q.bytes
		if w.emptied == nil {
			w.emptied = map[string]int{}
		}
		name := q.topic
		if q.channel != "" {
			name += ":" + q.channel
		}
		w.emptied[name]++
	}
	// Under a client sending on, this repeats every check: one warning per 10 s says it all.
	if time.Since(w.lastWarn) >= 10*time.Second {
		w.lastWarn = time.Now()
		w.log.Warn("embedded nsqd over its memory budget (nsq.embedded_max_memory): emptied its fullest queues, their messages are lost",
			"memory_bytes", before, "max_bytes", w.max, "emptied", w.emptied)
		w.emptied = nil
	}
}

// diskWatch keeps one nsqd's spilled messages under max bytes.
type diskWatch struct {
	node *nsqd.NSQD
	dir  string
	max  int64
	log  *slog.Logger
}

// repeat calls check every interval until quit is closed.
func repeat(quit <-chan struct{}, every time.Duration, check func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			check()
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

// empty drops every message of a queue named as its files are: topic, or topic:channel.
func (w *diskWatch) empty(queue string) error {
	topic, channel, _ := strings.Cut(queue, ":")
	return emptyQueue(w.node, topic, channel)
}

// emptyQueue drops every message of a topic's queue (channel "") or a channel's, in memory and on disk.
func emptyQueue(node *nsqd.NSQD, topicName, channelName string) error {
	topic, err := node.GetExistingTopic(topicName)
	if err != nil {
		return err
	}
	if channelName == "" {
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
		e.lock.Close()
	})
	return err
}

// Data directories: <tmp>/mqtarget-nsqd-<random>, holding a lock file that the process using the
// directory keeps locked (flock) and, once it holds the lock, a marker file. A process killed with
// SIGKILL cannot remove its directory, but the kernel releases its lock: the next start removes each
// directory whose lock it can take and whose marker exists (so a directory being set up, locked
// after its creation, is never taken for stale).
const (
	dataDirPrefix = "mqtarget-nsqd-"
	lockName      = "lock"
	markerName    = "in-use"
)

// makeDataDir creates a data directory under tmp and locks it.
func makeDataDir(tmp string) (string, *os.File, error) {
	dir, err := os.MkdirTemp(tmp, dataDirPrefix)
	if err != nil {
		return "", nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		var ok bool
		if ok, err = lockFile(f); err == nil && ok {
			if err = os.WriteFile(filepath.Join(dir, markerName), []byte(fmt.Sprintln(os.Getpid())), 0o600); err == nil {
				return dir, f, nil
			}
		} else if err == nil {
			err = errors.New("its new lock is held by another process")
		}
		f.Close()
	}
	_ = os.RemoveAll(dir)
	return "", nil, err
}

// removeStaleDirs removes the data directories under tmp that no live process holds, logging what it
// freed. Directories of older mqtarget versions (no lock file) and anything else are left alone.
func removeStaleDirs(tmp string, log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, dataDirPrefix+"*"))
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, markerName)); err != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if ok, _ := lockFile(f); ok {
			size := dirSize(dir)
			if err := os.RemoveAll(dir); err != nil {
				log.Warn("embedded nsqd: removing a data directory left by a killed process failed", "dir", dir, "err", err)
			} else {
				log.Info("embedded nsqd: removed a data directory left by a killed process", "dir", dir, "bytes", size)
			}
		}
		f.Close()
	}
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
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
