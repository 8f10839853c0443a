// Package roundtrip measures the way back: an echo that returns every consumed message to an ack topic,
// and a correlator that matches the acks to what was sent, by id.
package roundtrip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/lograte"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// Handoff is how the echo's consumer passes messages to its workers.
type Handoff string

const (
	// Queue: a queue in front of the workers ("async receive"); the consumer waits only while it is full
	// (EchoOptions.QueueMaxMessages, QueueMaxBytes).
	Queue Handoff = "queue"
	// Direct: a message goes to an idle worker, or the consumer publishes it itself when all are busy
	// ("async consume", caller-runs), so a slow ack topic slows the consumer down.
	Direct Handoff = "direct"
)

// ParseHandoff checks a handoff name.
func ParseHandoff(s string) (Handoff, error) {
	switch h := Handoff(s); h {
	case Queue, Direct:
		return h, nil
	}
	return "", fmt.Errorf("unknown handoff %q (queue or direct)", s)
}

// DefaultAckSuffix is appended to a topic to name where its acks go.
const DefaultAckSuffix = ".ack"

// EchoOptions configure an Echo.
type EchoOptions struct {
	Broker    string              // the metrics label
	Consumer  publishers.Consumer // where messages come from; the Echo does not close it
	Publisher publishers.Publisher
	Topics    []string
	AckSuffix string // default DefaultAckSuffix
	Handoff   Handoff
	Workers   int           // at least 1
	Timeout   time.Duration // bounds each ack publish
	Metrics   *Metrics      // nil: none
	Log       *slog.Logger

	// QueueMaxMessages and QueueMaxBytes bound the Queue handoff's queue (0: echo.queue_max_messages'
	// and echo.queue_max_bytes' defaults). A message that does not fit waits in the consumer's
	// callback, unconfirmed, so the broker's flow control holds the rest; one larger than QueueMaxBytes
	// is queued alone.
	QueueMaxMessages int
	QueueMaxBytes    int64

	// observe, when set, sees every message the echo receives, before its handoff (Batch's timing).
	observe func(publishers.Delivery)
	// copies, for tests, says how many times to publish the ack of id, a message of size bytes (0
	// drops it, 2 duplicates it).
	copies func(id string, size int) int
}

// Echo consumes topics and publishes every message unchanged (id and original send time kept) to the
// topic's ack topic, on the host index it came from (modulo the publisher's hosts).
type Echo struct {
	o      EchoOptions
	cancel context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup // consumers and workers
	queue  *queue         // Queue handoff
	direct chan publishers.Delivery
	oneWay prometheus.Observer
	echoed prometheus.Counter
	failed prometheus.Counter
}

// StartEcho starts consuming o.Topics; a topic that cannot be subscribed to yet is retried in the
// background. Close ends everything the Echo started and waits for it.
func StartEcho(o EchoOptions) (*Echo, error) {
	if o.Consumer == nil || o.Publisher == nil {
		return nil, errors.New("echo: consumer and publisher are required")
	}
	if o.Workers < 1 {
		return nil, fmt.Errorf("echo.workers: must be at least 1, got %d", o.Workers)
	}
	if _, err := ParseHandoff(string(o.Handoff)); err != nil {
		return nil, fmt.Errorf("echo.handoff: %w", err)
	}
	defaults := config.Default().Echo // the one place defaults are set
	if o.QueueMaxMessages == 0 {
		o.QueueMaxMessages = defaults.QueueMaxMessages
	}
	if o.QueueMaxBytes == 0 {
		o.QueueMaxBytes = defaults.QueueMaxBytes
	}
	if o.QueueMaxMessages < 0 {
		return nil, fmt.Errorf("echo.queue_max_messages: must be at least 1, got %d", o.QueueMaxMessages)
	}
	if o.QueueMaxBytes < 0 {
		return nil, fmt.Errorf("echo.queue_max_bytes: must be at least 1, got %d", o.QueueMaxBytes)
	}
	if o.AckSuffix == "" {
		o.AckSuffix = DefaultAckSuffix
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	// A failing ack broker fails every message echoed: its warnings are rate-limited per cause.
	o.Log = lograte.Logger(o.Log, lograte.New(lograte.Interval))
	for _, t := range o.Topics {
		if err := o.Publisher.ValidateTopic(t + o.AckSuffix); err != nil {
			return nil, fmt.Errorf("echo.ack_suffix: ack topic %q: %w", t+o.AckSuffix, err)
		}
	}
	e := &Echo{o: o}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if o.Metrics != nil {
		e.oneWay = o.Metrics.oneWay.WithLabelValues(o.Broker)
		e.echoed = o.Metrics.echoed.WithLabelValues(o.Broker)
		e.failed = o.Metrics.echoFailed.WithLabelValues(o.Broker)
	}
	if o.Handoff == Queue {
		e.queue = newQueue(o.QueueMaxMessages, o.QueueMaxBytes)
	} else {
		e.direct = make(chan publishers.Delivery) // unbuffered: a send succeeds only to an idle worker
	}
	for range o.Workers {
		e.wg.Add(1)
		go e.work()
	}
	for _, t := range o.Topics {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			consumeRetrying(e.ctx, o.Consumer, t, e.receive, o.Log.With("role", "echo"))
		}()
	}
	return e, nil
}

// receive runs on the consumer's goroutines.
func (e *Echo) receive(d publishers.Delivery) {
	if e.o.observe != nil {
		e.o.observe(d)
	}
	if e.oneWay != nil {
		if _, sent, err := message.Parse(d.Body); err == nil {
			e.oneWay.Observe(d.Received.Sub(sent).Seconds())
		}
	}
	if e.queue != nil {
		e.queue.push(e.ctx, d) // returns without queuing d once Close began
		return
	}
	select {
	case e.direct <- d:
	default:
		e.publish(d) // every worker is busy: the consumer does the work
	}
}

func (e *Echo) work() {
	defer e.wg.Done()
	for {
		var d publishers.Delivery
		if e.queue != nil {
			var ok bool
			if d, ok = e.queue.pop(e.ctx); !ok {
				return
			}
		} else {
			select {
			case d = <-e.direct:
			case <-e.ctx.Done():
				return
			}
		}
		e.publish(d)
	}
}

func (e *Echo) publish(d publishers.Delivery) {
	n := 1
	if e.o.copies != nil {
		id, _, _ := message.Parse(d.Body)
		n = e.o.copies(id, len(d.Body))
	}
	hosts := len(e.o.Publisher.Hosts())
	for range n {
		ctx, cancel := context.WithTimeout(e.ctx, e.o.Timeout)
		err := e.o.Publisher.Publish(ctx, d.Host%hosts, d.Topic+e.o.AckSuffix, d.Body)
		cancel()
		if err != nil {
			if e.failed != nil {
				e.failed.Inc()
			}
			if e.ctx.Err() == nil {
				e.o.Log.Warn("echo: publishing ack", "broker", e.o.Broker, "topic", d.Topic+e.o.AckSuffix, "err", err)
			}
			continue
		}
		if e.echoed != nil {
			e.echoed.Inc()
		}
	}
}

// Close stops consuming, drops what is still queued (and a delivery waiting for room) and waits for the
// consumers and workers.
func (e *Echo) Close() error {
	e.cancel()
	e.wg.Wait()
	return nil
}

// queue is a FIFO of deliveries for the Queue handoff, bounded by count and by bytes of bodies.
type queue struct {
	maxItems int
	maxBytes int64

	mu    sync.Mutex
	items []publishers.Delivery
	bytes int64
	ready chan struct{} // holds a token while items is non-empty
	room  chan struct{} // given a token by every pop: a waiting push looks again
}

func newQueue(maxItems int, maxBytes int64) *queue {
	return &queue{maxItems: maxItems, maxBytes: maxBytes, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// signal leaves a token in ch unless one is there already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// push appends d once it fits, waiting for room until ctx ends (then it returns false, d not queued). An
// empty queue takes any d, so a body larger than maxBytes waits for the queue to drain, not forever.
func (q *queue) push(ctx context.Context, d publishers.Delivery) bool {
	n := int64(len(d.Body))
	for {
		q.mu.Lock()
		if len(q.items) == 0 || (len(q.items) < q.maxItems && q.bytes+n <= q.maxBytes) {
			q.items = append(q.items, d)
			q.bytes += n
			more := len(q.items) < q.maxItems && q.bytes < q.maxBytes
			q.mu.Unlock()
			signal(q.ready)
			if more { // pass the token on, so another waiting push looks again
				signal(q.room)
			}
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-ctx.Done():
			return false
		}
	}
}

// pop waits for an item until ctx ends.
func (q *queue) pop(ctx context.Context) (publishers.Delivery, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			d := q.items[0]
			q.items[0] = publishers.Delivery{}
			q.items = q.items[1:]
			q.bytes -= int64(len(d.Body))
			more := len(q.items) > 0
			q.mu.Unlock()
			signal(q.room)
			if more { // pass the token on, so another idle worker wakes up
				signal(q.ready)
			}
			return d, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return publishers.Delivery{}, false
		}
	}
}
