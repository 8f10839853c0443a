package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqtarget/mqtarget/internal/lograte"
	"github.com/mqtarget/mqtarget/publishers"
)

// Timings and bounds.
const (
	discoverTimeout = 10 * time.Second // New and NewConsumer: until the cluster named its brokers
	dialTimeout     = 2 * time.Second
	topicPoll       = 50 * time.Millisecond // after creating a topic, until every partition has a leader
	metadataMinAge  = time.Second           // franz-go's pace of metadata updates after its quick retries
	maxTopics       = 10000                 // topics whose partition map is kept; beyond it the map starts afresh
	// maxBufferedBytes bounds what the producer holds for unanswered records, whatever their number.
	maxBufferedBytes   = 256 << 20
	maxBufferedRecords = 100000
	// batchMaxBytes is the producer's record batch bound, Kafka's default max.message.bytes (1 MB).
	batchMaxBytes = 1000012
)

// MaxBody is the largest message the publisher sends: what fits in one record batch with room for the
// batch and record headers. A larger one is refused before it is sent (ErrTooLarge); a broker or topic
// with a lower max.message.bytes refuses more (ErrRejected).
const MaxBody = batchMaxBytes - 512

// cluster is what the publisher and the consumer share: the client, the brokers in node-id order and
// the partition chosen for each host in each topic.
type cluster struct {
	cfg   Config
	cl    *kgo.Client
	adm   *kadm.Client
	log   *slog.Logger
	nodes []int32  // broker node ids, ascending: host k is nodes[k]
	hosts []string // their host:port
	table atomic.Pointer[hostTable]
	lost  atomic.Pointer[func(host int, err error)] // the publisher's: a produce connection to host failed
	proto protocolErrors

	mu      sync.Mutex
	topics  map[string]*topicState
	lookups *publishers.Scope // the topic lookups in progress; endLookups ends them
}

type topicState struct {
	ready   chan struct{}       // closed once parts and err are set, under cluster.mu
	waiters []func(*topicState) // run by the lookup's goroutine once ready is closed (awaitTopic)
	parts   []int32             // per host: the partition its publishes go to; -1: none
	host    map[int32]int       // partition -> host whose broker is its first replica
	leaders map[int32]int32     // partition -> its leader's node id, when looked up
	id      [16]byte            // the topic's id (produce v13 names topics by it)
	err     error
}

// clientOpts are the options of every client mqtarget makes for the cluster: bootstrap addresses,
// client id, checked connections (TLS when configured), SASL, a rate-limited logger and the connection
// counting hook.
func (k *cluster) clientOpts() ([]kgo.Opt, error) {
	c := k.cfg
	tc, err := c.TLSConfig.Client(Section)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.Dialer(k.dialer(tc)),
		kgo.WithLogger(logger{k.log}),
		kgo.DisableClientMetrics(), // nothing of ours to push; Close would wait up to 1 s for it
		// After its 2 s of quick retries, franz-go waits this long between metadata updates that a missing
		// topic or leader triggers; its default of 5 s equals publish_timeout's, so one slow election
		// failed a publish.
		kgo.MetadataMinAge(metadataMinAge),
		kgo.WithHooks((*connHook)(k)),
	}
	mech, err := c.saslMechanism(Section)
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// newCluster validates c, makes the client with extra options and asks the cluster for its brokers.
func newCluster(c Config, log *slog.Logger, extra ...kgo.Opt) (*cluster, error) {
	if err := c.Validate(Section); err != nil {
		return nil, err
	}
	if len(c.Brokers) == 0 {
		return nil, errors.New("kafka.brokers: at least one broker is required")
	}
	log = lograte.Logger(log, lograte.New(lograte.Interval)) // a failing cluster must not flood the log
	k := &cluster{cfg: c, log: log, topics: map[string]*topicState{}, lookups: publishers.NewScope()}
	opts, err := k.clientOpts()
	if err != nil {
		return nil, err
	}
	if k.cl, err = kgo.NewClient(append(opts, extra...)...); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	k.adm = kadm.NewClient(k.cl)
	ctx, cancel := context.WithTimeout(context.Background(), discoverTimeout)
	defer cancel()
	md, err := k.adm.BrokerMetadata(ctx)
	if err == nil && len(md.Brokers) == 0 {
		err = errors.New("the cluster named no brokers")
	}
	if err != nil {
		k.cl.Close()
		if field := saslField(err); field != "" {
			return nil, kind(publishers.ErrUnavailable, fmt.Errorf("%s.%s: the cluster refused the %s login of %q: %w", Section, field, c.SASLMechanism, c.SASLUser, err))
		}
		return nil, kind(publishers.ErrUnavailable, fmt.Errorf("kafka.brokers: %v: no cluster metadata within %v: %w", c.Brokers, discoverTimeout, err))
	}
	if len(md.Brokers) > publishers.MaxHosts {
		k.cl.Close()
		return nil, fmt.Errorf("kafka.brokers: the cluster has %d brokers, at most %d are supported", len(md.Brokers), publishers.MaxHosts)
	}
	slices.SortFunc(md.Brokers, func(a, b kgo.BrokerMetadata) int { return int(a.NodeID) - int(b.NodeID) })
	t := &hostTable{index: map[string]int{}, conns: make([]connCounts, len(md.Brokers))}
	for i, b := range md.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		k.nodes = append(k.nodes, b.NodeID)
		k.hosts = append(k.hosts, addr)
		t.index[addr] = i
	}
	k.proto.n = make([]atomic.Uint64, len(md.Brokers))
	k.table.Store(t)
	if c.ReplicationFactor > len(k.nodes) {
		k.cl.Close()
		return nil, fmt.Errorf("kafka.replication_factor: %d exceeds the cluster's %d brokers", c.ReplicationFactor, len(k.nodes))
	}
	return k, nil
}

// saslField names the setting a refused SASL login points at: the user (or its password) when the
// broker did not accept the credentials, the mechanism when it does not offer it; "" for other errors.
func saslField(err error) string {
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return "sasl_user"
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return "sasl_mechanism"
	}
	return ""
}

// checkHost refuses a host index the cluster has no broker for.
func (k *cluster) checkHost(host int) error {
	if host < 0 || host >= len(k.hosts) {
		return kind(publishers.ErrUnavailable, fmt.Errorf("kafka.brokers: host %d requested, the cluster has %d brokers", host, len(k.hosts)))
	}
	return nil
}

// topic returns topic's partition map, creating the topic when the cluster does not have it. Concurrent
// callers for one topic share one lookup, and each waits for it until its own ctx ends. The lookup is
// the cluster's, not the first caller's: bounded by lookupTimeout and endLookups, it goes on when that
// caller leaves, so a caller with a later deadline is not failed by an earlier one's, and a lookup
// slower than every caller's deadline (a topic being created on a busy cluster) still completes for
// the callers after them. A failed lookup is forgotten, so the next caller tries again.
func (k *cluster) topic(ctx context.Context, topic string) (*topicState, error) {
	k.mu.Lock()
	st, err := k.lookupLocked(topic)
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case <-st.ready:
		return st, st.err
	case <-ctx.Done():
		return nil, ctxErr(ctx)
	}
}

// topicNow is topic without waiting: its partition map when it is known (ready), otherwise the lookup
// in progress, started if there was none, to wait on with awaitTopic. A ready map has no error: a
// failed lookup leaves the map before it is ready.
func (k *cluster) topicNow(topic string) (st *topicState, ready bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st, err = k.lookupLocked(topic); err != nil {
		return nil, false, err
	}
	select {
	case <-st.ready:
		return st, true, nil
	default:
		return st, false, nil
	}
}

// awaitTopic queues then to run on st's lookup goroutine once it ended; false when it has ended
// already (then is not queued).
func (k *cluster) awaitTopic(st *topicState, then func(*topicState)) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-st.ready:
		return false
	default:
		st.waiters = append(st.waiters, then)
		return true
	}
}

// lookupLocked is topic's state, its lookup started when there is none. The caller holds mu.
func (k *cluster) lookupLocked(topic string) (*topicState, error) {
	if st := k.topics[topic]; st != nil {
		return st, nil
	}
	lctx, finished, err := k.lookups.Enter(context.Background())
	if err != nil {
		return nil, kind(publishers.ErrClosed, errors.New("kafka client closed"))
	}
	if len(k.topics) >= maxTopics {
		k.topics = map[string]*topicState{}
	}
	st := &topicState{ready: make(chan struct{})}
	k.topics[topic] = st
	go k.lookupFor(lctx, finished, topic, st)
	return st, nil
}

// lookupTimeout bounds one shared topic lookup (creation and leader election included).
const lookupTimeout = discoverTimeout

// lookupFor runs topic's shared lookup into st, within ctx (the lookups' scope) and lookupTimeout, then
// runs its waiters (on this goroutine: the scope owns it, and endLookups waits for them too).
func (k *cluster) lookupFor(ctx context.Context, finished func(), topic string, st *topicState) {
	defer finished()
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	err := k.lookup(ctx, topic, st)
	cancel()
	k.mu.Lock()
	st.err = err
	if err != nil && k.topics[topic] == st {
		delete(k.topics, topic)
	}
	waiters := st.waiters
	st.waiters = nil
	close(st.ready) // under mu: a waiter queued before is in waiters, none is queued after
	k.mu.Unlock()
	for _, w := range waiters {
		w(st)
	}
}

// endLookups stops the lookups in progress and waits for them; no lookup starts after it. The
// publisher's and consumer's Close call it before closing the client the lookups use.
func (k *cluster) endLookups() { k.lookups.Close() }

// lookup reads topic's partitions, creating the topic first when it does not exist: max(partitions,
// brokers) partitions, partition i with replicas brokers i, i+1, ... (replication_factor of them), so
// broker i is its preferred leader. Host k then publishes to the lowest partition whose first replica
// is broker k; in a topic made elsewhere without one, to partition k if there is one.
func (k *cluster) lookup(ctx context.Context, topic string, st *topicState) error {
	created := false
	for try := 0; ; try++ {
		td, err := k.metadata(ctx, try, topic)
		if err != nil {
			return k.lookupErr(ctx, topic, err)
		}
		terr := kerr.ErrorForCode(td.ErrorCode)
		switch {
		case errors.Is(terr, kerr.UnknownTopicOrPartition) && !created:
			if err := k.create(ctx, topic); err != nil {
				return err
			}
			created = true
			continue
		case terr != nil && !kerr.IsRetriable(terr):
			return kind(publishers.ErrRejected, fmt.Errorf("kafka: topic %s: %w", topic, terr))
		case topicReady(td) && k.othersKnow(ctx, try, topic):
			st.parts, st.host = k.partitionMap(td)
			st.leaders, st.id = map[int32]int32{}, td.TopicID
			for _, p := range td.Partitions {
				st.leaders[p.Partition] = p.Leader
			}
			return nil
		}
		select { // just created, or leaders being elected
		case <-ctx.Done():
			return ctxErr(ctx)
		case <-time.After(topicPoll):
		}
	}
}

// othersKnow: every broker but the try-th that answers knows topic and its leaders. A produce asks the
// client's metadata, which may go to any broker; one that has not caught up with a topic just created
// answers without it, and franz-go then waits its metadata backoff (seen: a first publish past a 5 s
// publish_timeout on a busy machine). A broker that does not answer is passed over: one broker down must
// not stop the lookup of new topics on the others.
func (k *cluster) othersKnow(ctx context.Context, try int, topic string) bool {
	for i := 1; i < len(k.nodes); i++ {
		td, err := k.metadata(ctx, try+i, topic)
		if err != nil {
			continue
		}
		if !topicReady(td) {
			return false
		}
	}
	return true
}

// metadata asks one broker (the try-th, in turn) for topic's metadata. It goes to a broker directly:
// the client's own metadata path keeps an unknown topic's answer for a while, which held a topic just
// created for 5 s.
func (k *cluster) metadata(ctx context.Context, try int, topic string) (kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.cl.Broker(int(k.nodes[try%len(k.nodes)])))
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t, nil
		}
	}
	return kmsg.MetadataResponseTopic{}, fmt.Errorf("the metadata answer lacks topic %s", topic)
}

func (k *cluster) lookupErr(ctx context.Context, topic string, err error) error {
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	return classify(fmt.Errorf("kafka: metadata of topic %s: %w", topic, err))
}

// topicReady: the answer names the topic without an error, with partitions, each with its leader.
func topicReady(td kmsg.MetadataResponseTopic) bool {
	return td.ErrorCode == 0 && len(td.Partitions) > 0 && leadersKnown(td)
}

func leadersKnown(td kmsg.MetadataResponseTopic) bool {
	for _, p := range td.Partitions {
		if p.Leader < 0 || p.ErrorCode != 0 {
			return false
		}
	}
	return true
}

// partitionMap: per host, the partition its publishes go to; per partition, the host of its first replica.
func (k *cluster) partitionMap(td kmsg.MetadataResponseTopic) ([]int32, map[int32]int) {
	ps := slices.Clone(td.Partitions)
	slices.SortFunc(ps, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition) - int(b.Partition) })
	parts := make([]int32, len(k.nodes))
	host := map[int32]int{}
	for h, node := range k.nodes {
		parts[h] = -1
		for _, p := range ps {
			if len(p.Replicas) > 0 && p.Replicas[0] == node {
				parts[h] = p.Partition
				break
			}
		}
		if parts[h] < 0 && h < len(ps) && ps[h].Partition == int32(h) {
			parts[h] = int32(h)
		}
	}
	for _, p := range ps {
		host[p.Partition] = -1
		if len(p.Replicas) > 0 {
			host[p.Partition] = slices.Index(k.nodes, p.Replicas[0])
		}
	}
	return parts, host
}

// create makes topic with the replica assignment lookup describes.
func (k *cluster) create(ctx context.Context, topic string) error {
	n := max(k.cfg.Partitions, len(k.nodes))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = int32(max(time.Until(d), time.Millisecond).Milliseconds())
	}
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, -1, -1
	for i := range n {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition = int32(i)
		for j := range k.cfg.ReplicationFactor {
			a.Replicas = append(a.Replicas, k.nodes[(i+j)%len(k.nodes)])
		}
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, k.cl)
	if err != nil {
		return k.lookupErr(ctx, topic, err)
	}
	if len(resp.Topics) != 1 {
		return kind(publishers.ErrUnavailable, fmt.Errorf("kafka: creating topic %s: %d topics in the answer", topic, len(resp.Topics)))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return classify(fmt.Errorf("kafka: creating topic %s: %w", topic, err))
	}
	k.log.Info("kafka: topic created", "topic", topic, "partitions", n, "replication_factor", k.cfg.ReplicationFactor)
	return nil
}

// ctxErr converts a context's error into ErrTimeout (deadline) or the cancellation itself.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return kind(publishers.ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}

// logger routes franz-go's log (warnings and errors only: its info level logs every connection) to ours.
type logger struct{ log *slog.Logger }

func (l logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l logger) Log(level kgo.LogLevel, msg string, kv ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	l.log.Log(context.Background(), lv, "kafka client: "+msg, kv...)
}
