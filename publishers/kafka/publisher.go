package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/mqtarget/mqtarget/publishers"
)

// Publisher publishes to a Kafka cluster with one franz-go producer (see the package documentation for
// the settings and why). It implements publishers.Publisher, BrokerVersioner and ConnCounter.
type Publisher struct {
	*cluster

	// gate is held for reading while a publish registers its pending entry and hands its records to
	// the client, for writing by Close when it marks the publisher closed: a publish that passed the
	// check is registered before Close fails every pending one.
	gate    sync.RWMutex
	closed  bool
	pmu     sync.Mutex
	pending map[*pending]struct{}
	// running counts the publishes registered in pending whose done has not returned: finish takes
	// them out of pending before it runs done, so Close, which fails what pending holds, waits on this
	// for a done a promise or a deadline is running at that moment.
	running sync.WaitGroup
	once    sync.Once

	versions []atomic.Pointer[string] // per host: what its ApiVersions answer says it runs
	pings    publishers.PingLimit     // Ping's connections: one per host and publishers.PingReuse
	down     []hostDown               // per host: its produce connection's last failure
	// waiting counts per host the async publishes queued on a topic lookup, for their bound: each holds
	// its message until the lookup ends.
	waiting []publishers.AsyncWaiting
}

// hostDown is a host whose produce connection failed: publishes to it are refused as unavailable for
// downFor after the failure, unless a produce to it succeeded since (franz-go redials meanwhile and
// retries what it holds), so a dead broker costs its callers no deadline each.
type hostDown struct {
	at  atomic.Int64 // unix nanoseconds of the last failure; 0: up
	err atomic.Pointer[error]
}

// downFor is how long a failed produce connection refuses publishes: franz-go's retry backoff is about
// as long.
const downFor = time.Second

// pending is one publish handed to the client (or waiting for its topic's lookup, to be handed): finish
// runs done exactly once, with the first outcome of its records, the deadline, or Close.
type pending struct {
	p      *Publisher
	host   int
	left   atomic.Int32 // records not answered yet
	fired  atomic.Bool
	done   func(error)
	cancel func()      // nil, or what ends the publish's request (PublishBatch)
	timer  *time.Timer // PublishAsync's deadline; set and read under pmu
}

func (q *pending) finish(err error) {
	if q.fired.Swap(true) {
		return
	}
	q.p.pmu.Lock()
	delete(q.p.pending, q)
	t := q.timer
	q.p.pmu.Unlock()
	if t != nil {
		t.Stop()
	}
	if q.cancel != nil {
		q.cancel()
	}
	q.done(err)
	q.p.running.Done()
}

// expire is PublishAsync's deadline, publish_timeout after the call. A record in a request to a broker
// that stopped answering is kept by the client until the connection fails; the caller hears now.
func (q *pending) expire() {
	q.finish(kind(publishers.ErrTimeout, fmt.Errorf("kafka: no answer within publish_timeout %v: %w", q.p.cfg.PublishTimeout, context.DeadlineExceeded)))
}

// New discovers the cluster's brokers (within 10 s: New fails when the cluster does not answer) and
// makes the producer. Topics are created on first use.
func New(c Config, log *slog.Logger) (*Publisher, error) {
	acks := kgo.AllISRAcks()
	if c.Acks == AcksLeader {
		acks = kgo.LeaderAck()
	}
	k, err := newCluster(c, log,
		kgo.RequiredAcks(acks),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), // a record goes out at once; records buffered meanwhile share a request
		kgo.RecordDeliveryTimeout(c.PublishTimeout),
		kgo.ProduceRequestTimeout(c.PublishTimeout),
		kgo.ProducerBatchMaxBytes(batchMaxBytes),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // the broker stores what was sent: sizes are as requested
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.MaxBufferedBytes(maxBufferedBytes),
		kgo.UnknownTopicRetries(2),
		// publish_timeout bounds a record in flight too: without this, franz-go keeps a record that was
		// in flight on a connection that died and resends it whenever the broker is back (measured: 15 s
		// after a kill -9 and a restart, a record answered 503 was stored). The cost: the idempotent
		// producer bumps its epoch after such a record, and one in flight when it failed may be stored.
		kgo.AllowIdempotentProduceCancellation(),
	)
	if err != nil {
		return nil, err
	}
	p := &Publisher{cluster: k, pending: map[*pending]struct{}{}, versions: make([]atomic.Pointer[string], len(k.hosts)),
		down: make([]hostDown, len(k.hosts)), waiting: make([]publishers.AsyncWaiting, len(k.hosts))}
	lost := p.failHost
	k.lost.Store(&lost)
	return p, nil
}

// failHost fails every publish pending on host: its produce connection failed, or a dial to it. franz-go retries the
// records on a new connection (the idempotent producer stores each once); the callers hear now.
func (p *Publisher) failHost(host int, err error) {
	p.pmu.Lock()
	var qs []*pending
	for q := range p.pending {
		if q.host == host {
			qs = append(qs, q)
		}
	}
	p.pmu.Unlock()
	err = kind(publishers.ErrUnavailable, fmt.Errorf("kafka: broker %d (%s): %w", p.nodes[host], p.hosts[host], err))
	p.down[host].err.Store(&err)
	p.down[host].at.Store(time.Now().UnixNano())
	for _, q := range qs {
		q.finish(err)
	}
}

// Hosts implements publishers.Publisher: the cluster's brokers in node-id order.
func (p *Publisher) Hosts() []string { return p.hosts }

// ValidateTopic implements publishers.Publisher (the package's ValidateTopic).
func (p *Publisher) ValidateTopic(name string) error { return ValidateTopic(name) }

// Publish implements publishers.Publisher: it returns once the partition leader answered per acks.
func (p *Publisher) Publish(ctx context.Context, host int, topic string, body []byte) error {
	return p.await(ctx, host, topic, [][]byte{body})
}

// PublishBatch implements publishers.Publisher: bodies go to host's partition as one record batch in one
// produce request (batch.go), answered per acks.
func (p *Publisher) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if len(bodies) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		return ctxErr(ctx) // nothing sent
	}
	if err := p.check(host, topic, bodies); err != nil {
		return err
	}
	return p.produceBatch(ctx, host, topic, bodies)
}

// check refuses what no publish may send: a host the cluster lacks, a topic Kafka refuses, a message
// over MaxBody, anything after Close.
func (p *Publisher) check(host int, topic string, bodies [][]byte) error {
	if err := p.checkHost(host); err != nil {
		return err
	}
	if err := ValidateTopic(topic); err != nil {
		return kind(publishers.ErrRejected, err)
	}
	if p.isClosed() {
		return errClosed()
	}
	for _, b := range bodies {
		if len(b) > MaxBody {
			return kind(publishers.ErrTooLarge, fmt.Errorf("kafka: a %d-byte message, at most %d fit in a record batch", len(b), MaxBody))
		}
	}
	if at := p.down[host].at.Load(); at != 0 && time.Since(time.Unix(0, at)) < downFor {
		return *p.down[host].err.Load()
	}
	return nil
}

func (p *Publisher) await(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if ctx.Err() != nil {
		return ctxErr(ctx) // nothing sent
	}
	ch := make(chan error, 1)
	q, err := p.send(ctx, host, topic, bodies, func(err error) { ch <- err })
	if err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// Not resent by us. The client may still send it within publish_timeout (then it is stored
		// once); past that it fails the record, in flight or not.
		q.finish(ctxErr(ctx))
		return <-ch
	}
}

// PublishAsync implements publishers.Publisher: done runs once with the answer, or with ErrTimeout
// after publish_timeout, or ErrClosed at Close. It never waits for the network: a publish to a topic
// whose lookup (and creation) is under way is queued on that lookup, whose goroutine hands it to the
// client once it ended (serve); its publish_timeout runs from the call all the same.
func (p *Publisher) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	bodies := [][]byte{body}
	if err := p.check(host, topic, bodies); err != nil {
		return err
	}
	st, ready, err := p.topicNow(topic)
	if err != nil {
		return err
	}
	if !ready {
		return p.wait(st, host, topic, body, done)
	}
	part, err := p.partition(st, topic, host)
	if err != nil {
		return err
	}
	p.gate.RLock()
	defer p.gate.RUnlock()
	if p.closed {
		return errClosed()
	}
	q := &pending{p: p, host: host, done: done}
	q.left.Store(1)
	p.register(q, p.cfg.PublishTimeout)
	p.produce(q, topic, part, bodies, time.Time{})
	return nil
}

// wait queues an async publish on its topic's lookup st, at most publishers.MaxAsyncWaiting per host.
// It is registered now, open, so Close fails it and its deadline runs from the call.
func (p *Publisher) wait(st *topicState, host int, topic string, body []byte, done func(error)) error {
	if !p.waiting[host].Take() {
		return p.waiting[host].Refusal(fmt.Sprintf("kafka: broker %d (%s)", p.nodes[host], p.hosts[host]), "a topic lookup")
	}
	at := time.Now()
	q := &pending{p: p, host: host, done: done}
	q.left.Store(1)
	p.gate.RLock()
	if p.closed {
		p.gate.RUnlock()
		p.waiting[host].Done()
		return errClosed()
	}
	p.register(q, p.cfg.PublishTimeout)
	queued := p.awaitTopic(st, func(st *topicState) { p.serve(q, st, topic, body, at) })
	p.gate.RUnlock()
	if !queued {
		p.serve(q, st, topic, body, at) // the lookup ended meanwhile: nothing left to wait for
	}
	return nil
}

// serve hands a queued async publish to the client once its topic's lookup ended, or gives done the
// lookup's failure. It runs on the lookup's goroutine (on the caller's when the lookup ended as the
// publish was queued: nothing is left to wait for). A publish its deadline or Close answered already is
// not sent: its caller heard it failed. The record is stamped with the call's time, from which the
// client counts publish_timeout too (RecordDeliveryTimeout), so it does not outlive the deadline its
// caller hears.
func (p *Publisher) serve(q *pending, st *topicState, topic string, body []byte, at time.Time) {
	p.waiting[q.host].Done()
	err := st.err
	if err == nil {
		var part int32
		if part, err = p.partition(st, topic, q.host); err == nil {
			p.gate.RLock()
			if !p.closed && !q.fired.Load() { // closed: Close fails it
				p.produce(q, topic, part, [][]byte{body}, at)
			}
			p.gate.RUnlock()
			return
		}
	}
	if p.isClosed() {
		err = errClosed() // the lookup ended because Close ended it
	}
	q.finish(err)
}

// partition is the partition host's publishes to topic go to.
func (p *Publisher) partition(st *topicState, topic string, host int) (int32, error) {
	if part := st.parts[host]; part >= 0 {
		return part, nil
	}
	return 0, kind(publishers.ErrUnavailable, fmt.Errorf("kafka: topic %s has no partition for host %d (broker %d)", topic, host, p.nodes[host]))
}

func errClosed() error { return kind(publishers.ErrClosed, errors.New("kafka publisher closed")) }

// send hands bodies to the client, ctx bounding the topic lookup (Publish's path: it waits under its
// ctx by design). The records' own context is the background: franz-go fails every record buffered for
// a partition when the first one's context ends (gapless order), so one caller's deadline would fail
// its neighbours' publishes (measured: a timed-out Publish failed 10 PublishAsync with "context
// canceled"). Their life is bounded by publish_timeout instead (RecordDeliveryTimeout), in flight too
// (AllowIdempotentProduceCancellation).
func (p *Publisher) send(ctx context.Context, host int, topic string, bodies [][]byte, done func(error)) (*pending, error) {
	if err := p.check(host, topic, bodies); err != nil {
		return nil, err
	}
	st, err := p.topic(ctx, topic)
	if err != nil {
		return nil, err
	}
	part, err := p.partition(st, topic, host)
	if err != nil {
		return nil, err
	}
	p.gate.RLock()
	defer p.gate.RUnlock()
	if p.closed {
		return nil, errClosed()
	}
	q := &pending{p: p, host: host, done: done}
	q.left.Store(int32(len(bodies)))
	p.register(q, 0)
	p.produce(q, topic, part, bodies, time.Time{})
	return q, nil
}

// produce hands q's bodies to the client for topic's partition part, stamped at (zero: now). The
// caller holds gate for reading and found the publisher open; q is registered.
func (p *Publisher) produce(q *pending, topic string, part int32, bodies [][]byte, at time.Time) {
	host := q.host
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			// named as the batch path names it: /send2Topic's answer must say which topic failed
			q.finish(classify(fmt.Errorf("kafka: produce to %s/%d: %w", r.Topic, r.Partition, err)))
			return
		}
		p.down[host].at.Store(0)
		if q.left.Add(-1) == 0 {
			q.finish(nil)
		}
	}
	for _, b := range bodies {
		// TryProduce: at the buffer's bound the record fails at once (ErrMaxBuffered) instead of
		// blocking the caller.
		p.cl.TryProduce(context.Background(), &kgo.Record{Topic: topic, Partition: part, Value: b, Timestamp: at}, promise)
	}
}

// register adds q to what Close fails and waits for, with its deadline timeout after now (0: none). The
// caller holds gate for reading and found the publisher open, so the count cannot rise once Close waits
// on it. The timer is armed under pmu, where finish reads it: one that fires at once waits for that. A
// timer, not a context: context.AfterFunc started a goroutine at every finish (its cancel runs the
// function), one per async publish.
func (p *Publisher) register(q *pending, timeout time.Duration) {
	p.running.Add(1)
	p.pmu.Lock()
	p.pending[q] = struct{}{}
	if timeout > 0 {
		q.timer = time.AfterFunc(timeout, q.expire)
	}
	p.pmu.Unlock()
}

func (p *Publisher) isClosed() bool {
	p.gate.RLock()
	defer p.gate.RUnlock()
	return p.closed
}

// Ping implements publishers.Publisher: an ApiVersions request to host's broker, which also tells
// what it runs (BrokerVersion). Behind publishers.PingLimit: /readyz pings every host per request, and
// franz-go dials a broker whose connection closed for each request, so unlimited pings of a broker
// that accepts and closes made thousands of connections a second; a result is reused for
// publishers.PingReuse unless the host's connections showed news since (connEvents).
func (p *Publisher) Ping(ctx context.Context, host int) error {
	if err := p.checkHost(host); err != nil {
		return err
	}
	if p.isClosed() {
		return errClosed()
	}
	return p.pings.Do(ctx, host, p.connEvents, func(ctx context.Context, host int) error {
		v, err := p.ping(ctx, host)
		if err != nil {
			return err
		}
		p.versions[host].Store(&v)
		return nil
	})
}

// ping asks host's broker for its API versions and returns the Kafka version they make.
func (k *cluster) ping(ctx context.Context, host int) (string, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "mqtarget", "1"
	resp, err := req.RequestWith(context.WithValue(ctx, oneDialKey{}, new(atomic.Bool)), k.cl.Broker(int(k.nodes[host])))
	if err != nil {
		if ctx.Err() != nil {
			return "", ctxErr(ctx)
		}
		return "", kind(publishers.ErrUnavailable, fmt.Errorf("kafka: broker %d (%s): %w", k.nodes[host], k.hosts[host], err))
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return "", classify(fmt.Errorf("kafka: broker %d (%s): ApiVersions: %w", k.nodes[host], k.hosts[host], err))
	}
	return "Kafka " + kversion.FromApiVersionsResponse(resp).VersionGuess(), nil
}

// BrokerVersion implements publishers.BrokerVersioner: Kafka tells no version, so this is franz-go's
// guess from the broker's API versions (e.g. "Kafka v4.1"), learned by Ping; "" before.
func (p *Publisher) BrokerVersion(host int) string {
	if host < 0 || host >= len(p.versions) {
		return ""
	}
	if v := p.versions[host].Load(); v != nil {
		return *v
	}
	return ""
}

// Close implements publishers.Publisher: every pending publish ends with ErrClosed, Close waits until
// every done has returned (one that a promise or a deadline runs meanwhile too), then the client closes
// (its goroutines end). Idempotent; a concurrent call waits for the first.
func (p *Publisher) Close() error {
	p.once.Do(func() {
		p.gate.Lock()
		p.closed = true
		p.gate.Unlock()
		p.pmu.Lock()
		qs := make([]*pending, 0, len(p.pending))
		for q := range p.pending {
			qs = append(qs, q)
		}
		p.pmu.Unlock()
		for _, q := range qs {
			q.finish(errClosed())
		}
		p.running.Wait()
		p.endLookups()
		p.cl.Close()
	})
	return nil
}
