package rocketmq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"reflect"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

// Config configures the RocketMQ publisher. RocketMQ is enabled when NameServers is non-empty.
type Config struct {
	NameServers []string          `yaml:"name_servers" help:"RocketMQ name server addresses host:port, comma-separated; empty disables RocketMQ"`
	Group       string            `yaml:"group" help:"RocketMQ producer group"`
	SendTimeout time.Duration     `yaml:"send_timeout" help:"RocketMQ send timeout per request, retries included (capped by publish_timeout)"`
	Retries     int               `yaml:"retries" help:"RocketMQ sync send retries, to the same broker, only when the send certainly stored nothing (the broker refused it, or it never left); never after a timeout (0..16)"`
	AccessKey   string            `yaml:"access_key" help:"RocketMQ ACL access key (optional)"`
	SecretKey   publishers.Secret `yaml:"secret_key" help:"RocketMQ ACL secret key (optional, never printed)"`
	// CreateTopics makes mqtarget create every topic it publishes to on every broker before the first
	// message (topic and topic2 at start), so brokers with autoCreateTopicEnable=false work too.
	CreateTopics bool `yaml:"create_topics" help:"create topics on every broker of the cluster (admin API) before publishing to them"`
	Queues       int  `yaml:"queues" help:"read/write queues per broker of the topics mqtarget creates"`
	Producers    int  `yaml:"producers" help:"RocketMQ producer instances (each with its own broker connections), used round-robin (client library)"`
	// TLS to the name servers and brokers. rocketmq-client-go does not verify certificates (see
	// rmqNewClient); mqtarget's own admin connections do.
	publishers.TLSConfig `yaml:",inline"`
	// Client picks the send path: mqtarget's own pipelined connection per broker, or rocketmq-client-go.
	Client string `yaml:"client" help:"RocketMQ send path: native (mqtarget's pipelined connection per broker) or library (rocketmq-client-go producers)"`
}

// DefaultConfig returns the RocketMQ defaults.
func DefaultConfig() Config {
	return Config{Group: "mqtarget", SendTimeout: 3 * time.Second, Retries: 2, Queues: 8, Producers: 2, Client: ClientNative}
}

// rocketmq's name rules (TopicValidator / group names): these characters, at most 127 (topic) and 255
// (group) of them.
var rmqName = publishers.NewNameChars("%|_-")

// Validate checks c; errors name the field under prefix (e.g. "rocketmq").
func (c Config) Validate(prefix string) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{prefix, field}, args...)...))
	}
	errs = append(errs, publishers.ValidateAddrs(prefix+".name_servers", c.NameServers))
	if c.Group == "" || len(c.Group) > 255 || !rmqName.All(c.Group) {
		add("group", "%q must be 1..255 characters of [%%|a-zA-Z0-9_-]", c.Group)
	}
	if c.SendTimeout <= 0 || c.SendTimeout > publishers.MaxPublishTimeout {
		add("send_timeout", "must be 1ns..%v, got %v", publishers.MaxPublishTimeout, c.SendTimeout)
	}
	if c.Retries < 0 || c.Retries > 16 {
		add("retries", "must be 0..16, got %d", c.Retries)
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		add("access_key", "access_key and secret_key must be set together")
	}
	if c.Queues < 1 || c.Queues > 1024 {
		add("queues", "must be 1..1024, got %d", c.Queues)
	}
	if c.Producers < 1 || c.Producers > 64 {
		add("producers", "must be 1..64, got %d", c.Producers)
	}
	errs = append(errs, c.TLSConfig.Validate(prefix))
	if c.TLSConfig.CertFile != "" {
		// The library's producers would go without it, and the native path's client certificate is
		// untested (the test brokers ask for none): refused for both rather than promised.
		add("tls_cert_file", "not supported: mqtarget presents no client certificate to RocketMQ (rocketmq-client-go cannot; the native client's is untested)")
	}
	if c.Client != ClientNative && c.Client != ClientLibrary {
		add("client", "must be %s or %s, got %q", ClientNative, ClientLibrary, c.Client)
	}
	return errors.Join(errs...)
}

// ValidateTopic applies RocketMQ's topic rules (TopicValidator): 1..127 characters of
// [%|a-zA-Z0-9_-], not the default topic TBW102 and not a system topic.
func ValidateTopic(name string) error {
	if name == "" || len(name) > 127 || !rmqName.All(name) {
		return fmt.Errorf("%q is not a valid RocketMQ topic (1-127 of [%%|a-zA-Z0-9_-])", name)
	}
	upper := strings.ToUpper(name)
	if name == "TBW102" || strings.HasPrefix(upper, "RMQ_SYS_") || strings.HasPrefix(name, "%RETRY%") ||
		strings.HasPrefix(name, "%DLQ%") || name == "SCHEDULE_TOPIC_XXXX" || name == "OFFSET_MOVED_EVENT" {
		return fmt.Errorf("%q is a RocketMQ system topic", name)
	}
	return nil
}

// Publisher publishes with rocketmq-client-go producers (rocketmq.client library); Native embeds it for
// what both paths share (discovery, topic creation, Ping, versions). Hosts are the cluster's broker groups (their
// masters), discovered from the name server at start and sorted by broker name; every publish targets
// one of them through a queue selector that picks a queue of that broker.
type Publisher struct {
	cfg      Config
	brokers  []admin.Broker
	hosts    []string
	admin    *admin.Client
	versions publishers.Versions  // what each broker said it runs (Ping: its runtime information)
	pings    publishers.PingLimit // Ping's connections: one per host and pingReuse
	log      *slog.Logger

	slots   []*rmqSlot
	targets []*primitive.MessageQueue // per host: what message() puts in Queue for brokerSelector
	next    atomic.Uint32
	queues  []atomic.Uint32 // per host: round-robin over that broker's queues

	topics sync.Map // topic -> *rmqTopic, when CreateTopics
	// creations are the topic creations in progress: the publisher's, not their first caller's (each
	// caller waits under its own ctx), bounded by rmqCreateTimeout and Close.
	creations *publishers.Scope

	mu      sync.Mutex
	retired []rmqRetired // producers replaced by a refresh, shut down a little later
	rlog    *slog.Logger // what this publisher routed the client's log to
	closed  atomic.Bool
	bg      sync.WaitGroup // route refreshes in flight

	// gate is held for reading while a send is inside the client (SendAsync), for writing by Close before
	// it shuts producers down: Shutdown must not run concurrently with a send (the client reads its
	// close flag unsynchronised), and a send that passed the closed check must register its pending
	// entry before Close fails every pending one.
	gate     sync.RWMutex
	pmu      sync.Mutex
	pending  map[*rmqPending]struct{} // sends handed to the client, not finished yet
	inClient sync.WaitGroup           // the client's callbacks not yet run (their goroutines still live)
	closing  chan struct{}            // closed when Close has finished

	// handoffs are the goroutines that hand sendSync's sends to the client: SendAsync may block for
	// seconds (a new topic's route look-up waits up to 6 s per name server under the client's lock),
	// so the caller waits for the outcome under its own ctx instead. Close waits for them; at most
	// rmqMaxHandoffs run (the client's own timeouts end them).
	handoffs *publishers.Scope
	handSlot chan struct{}
	// redials is each host's redial gate in front of the client, which dials on every send that finds
	// no connection: after a failed dial, publishes fail at once until backoff allows the next.
	redials []rmqRedial
	backoff publishers.Backoff
	// asyncWaiting counts each host's async publishes waiting on a goroutine of ours (waitAsync), for
	// their bound: each holds a message.
	asyncWaiting []publishers.AsyncWaiting
}

// rmqRedial is one host's redial state on the library path.
type rmqRedial struct {
	mu sync.Mutex
	r  publishers.Redial
}

// rmqPending is one send handed to the client; finish runs its done exactly once, from the client's
// callback or from Close (ErrClosed), whichever comes first.
type rmqPending struct {
	fired atomic.Bool
	done  func(*primitive.SendResult, error)
}

func (q *rmqPending) finish(res *primitive.SendResult, err error) {
	if !q.fired.Swap(true) {
		q.done(res, err)
	}
}

// rmqSlot is one producer; it is replaced by a fresh one when its route lost a broker we publish to.
type rmqSlot struct {
	cur         atomic.Pointer[rmqProducer]
	mu          sync.Mutex
	refreshedAt time.Time
}

type rmqProducer struct {
	p     rocketmq.Producer
	label string                    // pprof label value of the goroutines its client started (see shutdown)
	conns []interface{ ShutDown() } // the client's connection pools (name servers, brokers); nil if not found
	miss  atomic.Pointer[rmqMiss]   // the last route that lacked the intended broker
	// routes tells whether the client holds a topic's route (nil: a test's fake, taken as holding every
	// one); lookups is held by the async publish whose send may ask the name server for one (waitAsync).
	routes  rmqRouteHolder
	lookups chan struct{}
	// release gives up the producer's hold on the process's TLS mode (rmqNewClient); nil in tests
	release func()
}

// rmqRouteHolder is what rocketmq-client-go's producer tells of its routes: true while it holds none
// (or an empty one) for topic, when SendAsync asks the name server first, on its caller's goroutine.
type rmqRouteHolder interface{ IsPublishTopicNeedUpdate(topic string) bool }

// routed reports whether pr's client holds topic's route, so SendAsync will not wait for a name server.
func (pr *rmqProducer) routed(topic string) bool {
	return pr.routes == nil || !pr.routes.IsPublishTopicNeedUpdate(topic)
}

// rmqMiss is a topic whose route, in a producer, lacked a broker a request targeted.
type rmqMiss struct{ topic, broker string }

type rmqRetired struct {
	timer *time.Timer
	pr    *rmqProducer
	at    time.Time
}

type rmqTopic struct {
	done chan struct{}
	err  error
}

// Timings.
const (
	rmqDiscoverTimeout = 10 * time.Second
	// The client refreshes topic routes only every 30 s; when a route lacks the broker a request
	// targets (it was down) and the name server routes the topic there again, the producer is replaced,
	// at most this often per producer, so recovery is quick.
	rmqRefreshEvery = time.Second
	rmqRetireAfter  = 10 * time.Second // a replaced producer's in-flight sends finish within its 3 s timeout
	rmqRouteWait    = 5 * time.Second  // after creating a topic, until the name server routes it to every broker
	// rmqCreateTimeout bounds one shared topic creation (every broker, then the route wait).
	rmqCreateTimeout = 10 * time.Second
	// rmqMaxHandoffs bounds the sends handed to the client and not yet accepted by it (see handoffs).
	rmqMaxHandoffs = 4096
)

var rmqInstance atomic.Uint64

// NewLibrary discovers the brokers from the name servers, creates topics (when configured) and
// starts the rocketmq-client-go producers (rocketmq.client library).
func NewLibrary(c Config, topics []string, log *slog.Logger) (*Publisher, error) {
	p, err := newShared(c, topics, log)
	if err != nil {
		return nil, err
	}
	for range c.Producers {
		s := &rmqSlot{}
		pr, err := p.newProducer()
		if err != nil {
			p.Close()
			return nil, err
		}
		s.cur.Store(pr)
		p.slots = append(p.slots, s)
	}
	return p, nil
}

// newShared is what both send paths do first: discover the brokers, create the topics.
func newShared(c Config, topics []string, log *slog.Logger) (_ *Publisher, err error) {
	if err := c.Validate("rocketmq"); err != nil {
		return nil, err
	}
	if len(c.NameServers) == 0 {
		return nil, errors.New("rocketmq.name_servers: at least one name server is required")
	}
	adm, err := newRMQAdmin(c)
	if err != nil {
		return nil, err
	}
	log = publishers.LimitLog(log) // a failing broker (or the client library) must not flood the log (lograte)
	p := &Publisher{
		rlog:      routeRlog(log),
		cfg:       c,
		admin:     adm,
		log:       log,
		pending:   map[*rmqPending]struct{}{},
		closing:   make(chan struct{}),
		creations: publishers.NewScope(),
		handoffs:  publishers.NewScope(),
		handSlot:  make(chan struct{}, rmqMaxHandoffs),
		backoff:   publishers.DefaultBackoff(),
	}
	defer func() {
		if err != nil { // stop routing the client's log to a logger nobody owns
			rlogTarget.CompareAndSwap(p.rlog, nil)
			p.creations.Close() // a creation a timed-out start left running
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), rmqDiscoverTimeout)
	defer cancel()
	if p.brokers, err = discoverBrokers(ctx, p.admin, c.NameServers); err != nil {
		return nil, err
	}
	for _, b := range p.brokers {
		p.hosts = append(p.hosts, b.String())
	}
	p.redials = make([]rmqRedial, len(p.brokers))
	p.asyncWaiting = make([]publishers.AsyncWaiting, len(p.brokers))
	p.queues = make([]atomic.Uint32, len(p.brokers))
	for i, b := range p.brokers {
		p.targets = append(p.targets, &primitive.MessageQueue{BrokerName: b.Name, QueueId: i})
	}
	for _, t := range topics {
		if err := p.ensureTopic(ctx, t); err != nil {
			return nil, fmt.Errorf("rocketmq.create_topics: topic %s: %w", t, err)
		}
	}
	return p, nil
}

// newRMQAdmin is the remoting admin client with c's credentials and TLS settings. Its connections verify
// the name servers' and brokers' certificates (rocketmq-client-go's do not, see rmqNewClient).
func newRMQAdmin(c Config) (*admin.Client, error) {
	tc, err := c.TLSConfig.Client("rocketmq")
	if err != nil {
		return nil, err
	}
	return &admin.Client{Creds: admin.Credentials{AccessKey: c.AccessKey, SecretKey: string(c.SecretKey)}, TLS: tc}, nil
}

// rocketmq-client-go keeps its TLS switch in a process-wide variable: producer.WithTls writes
// remote.DefaultRemotingClientConfig, which every client shares by pointer and reads at each dial, and it
// dials with InsecureSkipVerify hard-coded (internal/remote/tcp_conn.go in the pinned version). So the
// producers alive in a process must agree on TLS: the switch is written only when it changes while no
// producer lives (never in a process that does not use TLS), and a producer wanting the other mode while
// one lives is refused.
var rmqTLSMode struct {
	mu   sync.Mutex
	live int  // producers created and not yet shut down
	tls  bool // the library's switch as last written (its default: off)
}

// rmqNewClient creates a producer with opts and the TLS mode useTLS; release, called once after the
// producer's shutdown, lets a later producer change the mode.
func rmqNewClient(useTLS bool, opts []producer.Option) (rocketmq.Producer, func(), error) {
	m := &rmqTLSMode
	m.mu.Lock()
	defer m.mu.Unlock()
	if useTLS != m.tls {
		if m.live > 0 {
			return nil, nil, fmt.Errorf("rocketmq.tls: %v here, but %d RocketMQ producers of this process use %v and rocketmq-client-go has one TLS switch per process", useTLS, m.live, m.tls)
		}
		opts = append(opts, producer.WithTls(useTLS))
	}
	prod, err := rocketmq.NewProducer(opts...)
	if err != nil {
		return nil, nil, err
	}
	m.tls = useTLS
	m.live++
	return prod, sync.OnceFunc(func() {
		m.mu.Lock()
		m.live--
		m.mu.Unlock()
	}), nil
}

// discoverBrokers asks the name servers in turn for the cluster's brokers; the first that lists any wins.
func discoverBrokers(ctx context.Context, adm *admin.Client, nameServers []string) ([]admin.Broker, error) {
	var errs []error
	for _, ns := range nameServers {
		b, err := adm.Brokers(ctx, ns)
		if err == nil && len(b) > 0 {
			return b, nil
		}
		if err == nil {
			err = admin.ErrNoBrokers
		}
		errs = append(errs, fmt.Errorf("%s: %w", ns, err))
	}
	return nil, fmt.Errorf("rocketmq.name_servers: no brokers found: %w", errors.Join(errs...))
}

func (p *Publisher) newProducer() (*rmqProducer, error) {
	// unique per producer: the client library shares one client per instance name in a process
	pr := &rmqProducer{label: fmt.Sprintf("mqtarget-%d-%d", os.Getpid(), rmqInstance.Add(1)), lookups: make(chan struct{}, 1)}
	opts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver(p.cfg.NameServers)),
		producer.WithGroupName(p.cfg.Group),
		producer.WithInstanceName(pr.label),
		// sendSync retries itself: the client's loop also resends after a timeout or a cancellation,
		// when the broker may already have stored the message
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(p.cfg.SendTimeout),
		producer.WithQueueSelector(&brokerSelector{p: p, pr: pr}),
		producer.WithCompressMsgBodyOverHowmuch(math.MaxInt32), // publish payloads verbatim
	}
	if p.cfg.AccessKey != "" {
		opts = append(opts, producer.WithCredentials(primitive.Credentials{AccessKey: p.cfg.AccessKey, SecretKey: string(p.cfg.SecretKey)}))
	}
	prod, release, err := rmqNewClient(p.cfg.TLSConfig.Enabled, opts)
	if err != nil {
		return nil, fmt.Errorf("rocketmq producer: %w", err)
	}
	pr.release = release
	if pr.conns, err = rmqRemotingClients(prod); err != nil {
		// only a lingering goroutine per name server connection after Close is at stake
		p.log.Warn("rocketmq: cannot close the client's name server connections at shutdown", "err", err)
	}
	// The goroutines the client starts inherit this goroutine's profiler labels: shutdown finds them by
	// the label to wait for them.
	pprof.Do(context.Background(), pprof.Labels(rmqGoroutineLabel, pr.label), func(context.Context) { err = prod.Start() })
	if err != nil {
		return nil, fmt.Errorf("rocketmq producer start: %w", err)
	}
	pr.p = prod
	pr.routes, _ = prod.(rmqRouteHolder)
	return pr, nil
}

// Goroutines of rocketmq-client-go's clients (function names in the pinned version).
const (
	rmqGoroutineLabel = "mqtarget_rocketmq_client"
	// rmqClient.Start's scheduled tasks that sleep 10 s before their first run (name server address
	// update, consumer offset persistence) and only then notice the shutdown. Nothing can wake them;
	// they do nothing for a producer (static name server list, no consumers) and then end.
	rmqSleeper1 = "github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.1"
	rmqSleeper4 = "github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.4"
	// the reader of one connection
	rmqConnReader = "github.com/apache/rocketmq-client-go/v2/internal/remote.(*remotingClient).receiveResponse"
	// how long shutdown waits for the client's goroutines: the heartbeat task sleeps 1 s before its
	// first run, a route update in progress ends by its 3 s timeout
	rmqGoroutineWait = 5 * time.Second
)

// shutdown stops pr's client and waits (bounded) for the goroutines it started, except the two 10 s
// sleepers that nothing can wake (they end by themselves, at most 10 s after the start).
func (p *Publisher) shutdown(pr *rmqProducer) {
	// Shutdown closes the broker connections and stops the scheduled tasks, once they wake.
	_ = pr.p.Shutdown()
	// A task running at the shutdown may still dial (the heartbeat goes on to the next broker, the route
	// updater asks the name server): connections are closed once they have ended.
	if err := rmqWaitGoroutines(pr.label, rmqGoroutineWait, rmqSleeper1, rmqSleeper4, rmqConnReader); err != nil {
		p.log.Warn("rocketmq: client goroutines outlive the shutdown", "err", err)
	}
	// Shutdown never closes the name server connections, nor broker connections dialled after it: their
	// readers would live until the server drops the idle connection (120 s).
	for _, c := range pr.conns {
		c.ShutDown()
	}
	if err := rmqWaitGoroutines(pr.label, rmqGoroutineWait, rmqSleeper1, rmqSleeper4); err != nil {
		p.log.Warn("rocketmq: client goroutines outlive the shutdown", "err", err)
	}
	if pr.release != nil {
		pr.release()
	}
}

// rmqWaitGoroutines waits until every goroutine labelled label runs one of the functions in allowed
// (somewhere in its stack), at most d; it polls the goroutine profile.
func rmqWaitGoroutines(label string, d time.Duration, allowed ...string) error {
	end := time.Now().Add(d)
	for {
		n := rmqLabelled(label, allowed)
		if n == 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%d goroutines of client %s still running after %v", n, label, d)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// rmqLabelled counts the goroutines labelled label that run none of the allowed functions, from the
// goroutine profile's text form (debug=1: one record per distinct stack, "N @ ..." then "# labels: {...}"
// then one "#\t0xPC\tfunction+0xOFF\tfile:line" line per frame).
func rmqLabelled(label string, allowed []string) int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	want := fmt.Sprintf("%q:%q", rmqGoroutineLabel, label)
	n := 0
	for rec := range strings.SplitSeq(buf.String(), "\n\n") {
		if !strings.Contains(rec, want) {
			continue
		}
		ok := false
		for _, fn := range allowed {
			if strings.Contains(rec, "\t"+fn+"+0x") {
				ok = true
				break
			}
		}
		if !ok {
			count, _, _ := strings.Cut(rec, " @ ") // the first record follows the profile's header line
			k, err := strconv.Atoi(count[strings.LastIndexByte(count, '\n')+1:])
			if err != nil {
				k = 1
			}
			n += k
		}
	}
	return n
}

// rmqRemotingClients finds the connection pools of a producer's client, unexported in
// rocketmq-client-go: defaultProducer.options.Namesrv.(*namesrvs).nameSrvClient (name servers) and
// defaultProducer.client.(*rmqClient).remoteClient (brokers). TestRMQRemotingClients checks the paths
// against the pinned version.
func rmqRemotingClients(prod rocketmq.Producer) ([]interface{ ShutDown() }, error) {
	v := reflect.ValueOf(prod)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("producer is a %T", prod)
	}
	ns, err := rmqField(v.Elem(), "options", "Namesrv", "nameSrvClient")
	if err != nil {
		return nil, err
	}
	rc, err := rmqField(v.Elem(), "client", "remoteClient")
	if err != nil {
		return nil, err
	}
	return []interface{ ShutDown() }{ns, rc}, nil
}

// rmqField follows path from struct v (through interfaces and pointers, exported or not) to a value with
// a ShutDown method.
func rmqField(v reflect.Value, path ...string) (interface{ ShutDown() }, error) {
	for _, name := range path {
		for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return nil, fmt.Errorf("nil before %s", name)
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return nil, fmt.Errorf("%v before %s is no struct", v.Type(), name)
		}
		v = v.FieldByName(name)
		if !v.IsValid() || !v.CanAddr() {
			return nil, fmt.Errorf("no field %s", name)
		}
		// unexported: read it through its address
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	if (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && v.IsNil() {
		return nil, fmt.Errorf("%s is nil", path[len(path)-1])
	}
	sd, ok := v.Interface().(interface{ ShutDown() })
	if !ok {
		return nil, fmt.Errorf("%s is a %v without ShutDown", path[len(path)-1], v.Type())
	}
	return sd, nil
}

// brokerSelector picks a queue of the broker named by the message's Queue field (set by the publisher
// only to carry the target; the client ignores it otherwise), round-robin over that broker's queues.
type brokerSelector struct {
	p  *Publisher
	pr *rmqProducer
}

func (s *brokerSelector) Select(msg *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	if msg.Queue == nil || msg.Queue.QueueId < 0 || msg.Queue.QueueId >= len(s.p.queues) {
		return nil
	}
	host := msg.Queue.QueueId
	name := s.p.brokers[host].Name
	n := 0
	for _, mq := range mqs {
		if mq.BrokerName == name {
			n++
		}
	}
	if n == 0 {
		// The route lacks this broker (it was down when the client last asked). Returning nil fails the
		// send with "route info not found"; the publisher then replaces this producer.
		s.pr.miss.Store(&rmqMiss{msg.Topic, name})
		return nil
	}
	k := int(s.p.queues[host].Add(1) % uint32(n))
	for _, mq := range mqs {
		if mq.BrokerName == name {
			if k == 0 {
				return mq
			}
			k--
		}
	}
	return nil
}

// Hosts implements Publisher: "broker-name@master-address", sorted by broker name.
func (p *Publisher) Hosts() []string { return p.hosts }

// ValidateTopic implements Publisher.
func (p *Publisher) ValidateTopic(name string) error { return ValidateTopic(name) }

func (p *Publisher) message(host int, topic string, body []byte) *primitive.Message {
	m := primitive.NewMessage(topic, body)
	// Queue carries the target host to brokerSelector (QueueId = host index); the client only reads it.
	m.Queue = p.targets[host]
	return m
}

func (p *Publisher) pick(host int) (*rmqSlot, *rmqProducer, error) {
	if p.closed.Load() {
		return nil, nil, publishers.ErrClosed
	}
	if host < 0 || host >= len(p.brokers) {
		return nil, nil, fmt.Errorf("rocketmq: host %d out of range (%d brokers)", host, len(p.brokers))
	}
	s := p.slots[int(p.next.Add(1))%len(p.slots)]
	return s, s.cur.Load(), nil
}

// Publish implements Publisher with SendSync.
func (p *Publisher) Publish(ctx context.Context, host int, topic string, body []byte) error {
	return p.sendSync(ctx, host, topic, [][]byte{body})
}

// PublishBatch implements Publisher with one SendSync of all bodies (a RocketMQ batch).
func (p *Publisher) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	return p.sendSync(ctx, host, topic, bodies)
}

func (p *Publisher) sendSync(ctx context.Context, host int, topic string, bodies [][]byte) error {
	s, pr, err := p.pick(host)
	if err != nil {
		return err
	}
	dl := time.Now().Add(p.cfg.SendTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	if p.cfg.CreateTopics {
		tctx, cancel := context.WithDeadline(ctx, dl)
		err := p.ensureTopic(tctx, topic)
		cancel()
		if err != nil {
			return err
		}
	}
	if ctx.Err() != nil { // the caller left before anything was sent
		return publishers.CtxErr(ctx)
	}
	// Once handed to the client the send finishes under its own deadline whatever the caller does: the
	// client resent a cancelled send at once, so a hung-up HTTP client left 1+retries copies in the
	// broker. The caller waits for its outcome until its own ctx ends or dl (wctx), whatever the client
	// does meanwhile (SendAsync blocks on name server look-ups, its send goroutine on connection locks
	// held across another send's write); Close ends the wait with ErrClosed.
	wctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	msgs := make([]*primitive.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = p.message(host, topic, b)
	}
	var res *primitive.SendResult
	for attempt := 0; ; attempt++ {
		if err = p.redialCheck(host); err != nil {
			break
		}
		ch := make(chan rmqOutcome, 1)
		if err = p.handOff(dl, pr, msgs, ch); err != nil {
			break
		}
		select {
		case o := <-ch:
			res, err = o.res, o.err
		case <-wctx.Done():
			err = wctx.Err()
		}
		p.redialNote(host, err)
		// Resent from this goroutine only, so never after the caller has left (wctx).
		if err == nil || attempt >= p.cfg.Retries || wctx.Err() != nil || errors.Is(err, publishers.ErrClosed) || !rmqNotStored(err) || rmqDenied(err) {
			break
		}
	}
	p.refreshIfStale(s, pr)
	return p.result(wctx, res, err)
}

type rmqOutcome struct {
	res *primitive.SendResult
	err error
}

// handOff sends msgs through pr's client on a goroutine of the publisher; ch gets the one outcome:
// the client's callback, ErrClosed from Close, or the client's refusal.
func (p *Publisher) handOff(dl time.Time, pr *rmqProducer, msgs []*primitive.Message, ch chan<- rmqOutcome) error {
	select {
	case p.handSlot <- struct{}{}:
	default:
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("%d sends wait to enter rocketmq-client-go", rmqMaxHandoffs))
	}
	_, done, err := p.handoffs.Enter(context.Background())
	if err != nil {
		<-p.handSlot
		return err
	}
	q := &rmqPending{done: func(res *primitive.SendResult, err error) { ch <- rmqOutcome{res, err} }}
	go func() {
		defer done()
		defer func() { <-p.handSlot }()
		// The client gets a context of its own, cancelled once it has called back: cancelling one it
		// still waits on (when Close ended the wait) makes it read a response arriving at that moment
		// without synchronisation (a data race in the client).
		actx, acancel := context.WithDeadline(context.Background(), dl)
		if err := p.send(actx, acancel, pr, q, msgs); err != nil {
			ch <- rmqOutcome{nil, err} // refused: q never finishes
		}
	}()
	return nil
}

// redialCheck fails at once while host is in redial backoff after a failed dial.
func (p *Publisher) redialCheck(host int) error {
	if host >= len(p.redials) {
		return nil
	}
	g := &p.redials[host]
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.r.Check(time.Now()); err != nil {
		return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("rocketmq broker %s: redial backoff after a failed dial: %w", p.hosts[host], err))
	}
	return nil
}

// redialNote records a send's outcome in host's redial gate: a failed dial is a failure, an answer
// from the broker (success or a response code) ends the backoff; a timeout tells nothing.
func (p *Publisher) redialNote(host int, err error) {
	if host >= len(p.redials) {
		return
	}
	var op *net.OpError
	failed := err != nil && errors.As(err, &op) && op.Op == "dial"
	if err != nil && !failed {
		if _, coded := rmqCode(err); !coded {
			return
		}
	}
	g := &p.redials[host]
	g.mu.Lock()
	defer g.mu.Unlock()
	if failed {
		g.r.Failed(p.backoff, time.Now(), err)
	} else {
		g.r = publishers.Redial{}
	}
}

// send hands msgs to pr's client; q finishes with the client's outcome, or with ErrClosed when Close
// comes first. An error return means the client refused the send: q never finishes then. release runs
// once the client is done with ctx.
func (p *Publisher) send(ctx context.Context, release func(), pr *rmqProducer, q *rmqPending, msgs []*primitive.Message) error {
	// Only Close takes the gate for writing: held or waited for, Close is under way. Waiting for it
	// would wait for the sends inside the client, which may be asking a name server (seconds).
	if !p.gate.TryRLock() {
		release()
		return publishers.ErrClosed
	}
	defer p.gate.RUnlock()
	if p.closed.Load() {
		release()
		return publishers.ErrClosed
	}
	p.pmu.Lock()
	p.pending[q] = struct{}{}
	p.pmu.Unlock()
	p.inClient.Add(1)
	err := pr.p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
		defer p.inClient.Done()
		defer release()
		p.untrack(q)
		q.finish(res, err)
	}, msgs...)
	if err != nil { // the client calls back only for a send it accepted
		p.untrack(q)
		release()
		p.inClient.Done()
	}
	return err
}

func (p *Publisher) untrack(q *rmqPending) {
	p.pmu.Lock()
	delete(p.pending, q)
	p.pmu.Unlock()
}

// rmqNotStored reports whether a failed send certainly left nothing in the broker, so that resending it
// cannot store the message twice: the broker refused it before storing (SERVICE_NOT_AVAILABLE,
// NO_PERMISSION, TOPIC_NOT_EXIST; not SYSTEM_ERROR, which also follows a put: rmqNativeNotStored), the
// request never left (no route, no connection), or writing it failed (the client then closes the
// connection, and the broker drops the partial frame). A timeout is ambiguous, the broker may have
// stored the message: it is never resent and answered 504.
func rmqNotStored(err error) bool {
	if code, ok := rmqCode(err); ok {
		switch code {
		case 14, 16, 17:
			return true
		}
		return false
	}
	if strings.Contains(err.Error(), "route info not found") {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "write")
}

// rmqCode extracts the broker's response code from the client's "CODE: n, DESC: ..." error.
func rmqCode(err error) (int, bool) {
	code, ok := strings.CutPrefix(err.Error(), "CODE: ")
	if !ok {
		return 0, false
	}
	n, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(code, ",", 2)[0]))
	return n, true
}

// PublishAsync implements Publisher with SendAsync; done runs on the client's goroutine. A publish whose
// topic is still being created, or whose route the producer does not hold yet (SendAsync would ask the
// name server on the caller's goroutine), waits on a goroutine of the publisher's (waitAsync): /sendAsync
// answers at once. The common case is handed to the client here, without a goroutine of ours.
func (p *Publisher) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	s, pr, err := p.pick(host)
	if err != nil {
		return err
	}
	if err := p.redialCheck(host); err != nil {
		return err
	}
	msgs := []*primitive.Message{p.message(host, topic, body)}
	if !p.topicReady(topic) || !pr.routed(topic) {
		return p.waitAsync(s, pr, host, topic, msgs, done)
	}
	return p.sendAsync(context.Background(), func() {}, s, pr, host, msgs, done)
}

// sendAsync hands msgs to pr's client (see send for ctx and release); done runs once with the outcome,
// unless sendAsync returns an error.
func (p *Publisher) sendAsync(ctx context.Context, release func(), s *rmqSlot, pr *rmqProducer, host int, msgs []*primitive.Message, done func(error)) error {
	// rmqPending runs done once: v2.1.2 called back twice on a transport error (the pinned commit fixed
	// it), and Close may have failed the publish already.
	q := &rmqPending{done: func(res *primitive.SendResult, err error) {
		p.redialNote(host, err)
		done(p.result(context.Background(), res, err))
	}}
	err := p.send(ctx, release, pr, q, msgs)
	p.refreshIfStale(s, pr)
	if err != nil {
		p.redialNote(host, err)
		return p.result(context.Background(), nil, err)
	}
	return nil
}

// waitAsync runs PublishAsync's waits on a goroutine Close ends and waits for (a handoff), within the
// send timeout: the topic's creation, then the producer's route look-up, which SendAsync makes; then it
// hands msgs to the client, or gives done what ended the wait. The look-ups go one at a time per
// producer (lookups): the client serialises them anyway, and each send that finds no route asks again,
// so those behind the first find it and send at once. At most MaxAsyncWaiting wait per host, beyond
// which it refuses at once.
func (p *Publisher) waitAsync(s *rmqSlot, pr *rmqProducer, host int, topic string, msgs []*primitive.Message, done func(error)) error {
	waiting := &p.asyncWaiting[host]
	if !waiting.Take() {
		return waiting.Refusal("rocketmq broker "+p.hosts[host], "a topic's creation or route")
	}
	ctx, leave, err := p.handoffs.Enter(context.Background()) // Close ends ctx
	if err != nil {
		waiting.Done()
		return err
	}
	dl := time.Now().Add(p.cfg.SendTimeout)
	go func() {
		defer leave()
		defer waiting.Done()
		ctx, cancel := context.WithDeadline(ctx, dl)
		defer cancel()
		err := p.ensureTopic(ctx, topic)
		if err == nil && !pr.routed(topic) {
			select {
			case pr.lookups <- struct{}{}:
				defer func() { <-pr.lookups }()
			case <-ctx.Done():
				err = publishers.CtxErr(ctx)
			}
		}
		if err == nil {
			err = p.redialCheck(host) // a dial may have failed meanwhile
		}
		if err == nil && ctx.Err() != nil {
			// Out of time, or Close came: nothing is sent. The client would send with a context past
			// its deadline all the same, and the broker store what was answered as a timeout.
			err = publishers.CtxErr(ctx)
		}
		if err == nil {
			// As in handOff, the client gets a context of its own, cancelled once it has called back.
			actx, acancel := context.WithDeadline(context.Background(), dl)
			err = p.sendAsync(actx, acancel, s, pr, host, msgs, done)
		}
		if err != nil {
			if p.closed.Load() { // Close ended the wait
				err = publishers.ErrClosed
			}
			done(err)
		}
	}()
	return nil
}

// result maps the client's outcome onto the error kinds.
func (p *Publisher) result(ctx context.Context, res *primitive.SendResult, err error) error {
	if err == nil {
		switch {
		case res == nil || res.Status == primitive.SendOK:
			return nil
		case res.Status == primitive.SendFlushDiskTimeout || res.Status == primitive.SendFlushSlaveTimeout || res.Status == primitive.SendSlaveNotAvailable:
			return errRMQNotDurable(fmt.Errorf("send status %d", res.Status))
		}
		return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("send status %d", res.Status))
	}
	if errors.Is(err, publishers.ErrClosed) {
		return err
	}
	if ctx.Err() != nil {
		return publishers.CtxErr(ctx)
	}
	switch {
	case errors.Is(err, rmqerrors.ErrRequestTimeout), errors.Is(err, context.DeadlineExceeded):
		return publishers.Wrap(publishers.ErrTimeout, err)
	case errors.Is(err, rmqerrors.ErrNotRunning):
		return publishers.Wrap(publishers.ErrClosed, err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return publishers.Wrap(publishers.ErrUnavailable, err)
	}
	if rmqLoginRefused(err) {
		return errRMQLoginRefused(p.cfg, err)
	}
	if n, ok := rmqCode(err); ok {
		switch n {
		case 1, 2, 14: // SYSTEM_ERROR, SYSTEM_BUSY (flow control), SERVICE_NOT_AVAILABLE
			return publishers.Wrap(publishers.ErrUnavailable, err)
		case rmqResFlushDiskTimeout, rmqResSlaveNotAvailable, rmqResFlushSlaveTimeout:
			return errRMQNotDurable(err)
		}
		return publishers.Wrap(publishers.ErrRejected, err)
	}
	return publishers.Wrap(publishers.ErrUnavailable, err)
}

// errRMQNotDurable is the outcome of FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE and FLUSH_SLAVE_TIMEOUT: the
// broker stored the message but did not flush or replicate it in time, so whether it survives is
// unknown, as after a timeout (504), not refused (502).
func errRMQNotDurable(err error) error {
	return publishers.Wrap(publishers.ErrTimeout, fmt.Errorf("the broker acknowledged the message as not durable in time (stored, not flushed or replicated): its outcome is unknown: %w", err))
}

// refreshIfStale replaces pr when its route lacked a broker a request targeted, at most once per
// rmqRefreshEvery per slot; the new producer asks the name server for fresh routes on first use.
func (p *Publisher) refreshIfStale(s *rmqSlot, pr *rmqProducer) {
	if pr.miss.Load() == nil || !s.mu.TryLock() {
		return
	}
	if s.cur.Load() != pr || p.closed.Load() || time.Since(s.refreshedAt) < rmqRefreshEvery {
		s.mu.Unlock()
		return
	}
	s.refreshedAt = time.Now()
	p.mu.Lock() // orders Add before Close's Wait
	if p.closed.Load() {
		p.mu.Unlock()
		s.mu.Unlock()
		return
	}
	p.bg.Add(1)
	p.mu.Unlock()
	go func() { // off the request path: it asks the name server first
		defer p.bg.Done()
		defer s.mu.Unlock()
		p.refresh(s, pr)
	}()
}

// refresh replaces pr when the name server now routes the missed topic to the missed broker (a new
// producer would not see it either otherwise, and replacing would only churn).
func (p *Publisher) refresh(s *rmqSlot, pr *rmqProducer) {
	miss := pr.miss.Swap(nil)
	if miss == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.SendTimeout)
	routed := false
	for _, ns := range p.cfg.NameServers {
		if route, err := p.admin.Route(ctx, ns, miss.topic); err == nil {
			routed = route[miss.broker] > 0
			break
		}
	}
	cancel()
	if !routed {
		return
	}
	np, err := p.newProducer()
	if err != nil {
		p.log.Warn("rocketmq: replacing a producer with a stale route failed", "err", err)
		return
	}
	s.cur.Store(np)
	p.log.Warn("rocketmq: replaced a producer whose route lacked a broker that is back", "rocketmq_broker", miss.broker, "topic", miss.topic)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		p.shutdown(np)
		p.shutdown(pr)
		return
	}
	live := p.retired[:0]
	for _, r := range p.retired {
		if time.Since(r.at) < 2*rmqRetireAfter { // older ones were shut down by their timer
			live = append(live, r)
		}
	}
	p.retired = append(live, rmqRetired{time.AfterFunc(rmqRetireAfter, func() { p.shutdown(pr) }), pr, time.Now()})
}

// ensureTopic creates topic on every broker once, when CreateTopics is set, and waits until the name
// server routes it to all of them. Concurrent callers for one topic share one creation, and each waits
// for it until its own ctx ends. The creation is the publisher's, not the first caller's: bounded by
// rmqCreateTimeout and Close, it goes on when that caller leaves, so a caller with a later deadline is
// not failed by an earlier one's, and a creation slower than every caller's deadline still completes.
// A failed creation is forgotten, so the next caller tries again.
func (p *Publisher) ensureTopic(ctx context.Context, topic string) error {
	if !p.cfg.CreateTopics {
		return nil
	}
	v, loaded := p.topics.LoadOrStore(topic, &rmqTopic{done: make(chan struct{})})
	t := v.(*rmqTopic)
	if !loaded {
		cctx, done, err := p.creations.Enter(context.Background())
		if err != nil {
			t.err = err
			p.topics.CompareAndDelete(topic, t)
			close(t.done)
		} else {
			go p.createFor(cctx, done, topic, t)
		}
	}
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return publishers.CtxErr(ctx)
	}
}

// topicReady reports whether ensureTopic would return nil at once: topic exists (created, when
// CreateTopics is set).
func (p *Publisher) topicReady(topic string) bool {
	if !p.cfg.CreateTopics {
		return true
	}
	v, ok := p.topics.Load(topic)
	if !ok {
		return false
	}
	t := v.(*rmqTopic)
	select {
	case <-t.done:
		return t.err == nil
	default:
		return false
	}
}

// createFor runs topic's shared creation into t; ctx ends at Close, done leaves the scope.
func (p *Publisher) createFor(ctx context.Context, done func(), topic string, t *rmqTopic) {
	defer done()
	ctx, cancel := context.WithTimeout(ctx, rmqCreateTimeout)
	defer cancel()
	t.err = p.createTopic(ctx, topic)
	if t.err != nil {
		if p.closed.Load() {
			t.err = publishers.ErrClosed
		}
		p.topics.CompareAndDelete(topic, t)
	}
	close(t.done)
}

func (p *Publisher) createTopic(ctx context.Context, topic string) error {
	for _, b := range p.brokers {
		if err := p.admin.CreateTopic(ctx, b.Addr, topic, p.cfg.Queues); err != nil {
			if ctx.Err() != nil {
				return publishers.CtxErr(ctx)
			}
			var ce *admin.CodeError
			if rmqLoginRefused(err) {
				return fmt.Errorf("creating topic on %s: %w", b, errRMQLoginRefused(p.cfg, err))
			}
			if errors.As(err, &ce) {
				return publishers.Wrap(publishers.ErrRejected, fmt.Errorf("creating topic on %s: %w", b, err))
			}
			return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("creating topic on %s: %w", b, err))
		}
	}
	// The brokers register the topic with the name server right away; wait for it so the producer's
	// first route lookup sees every broker.
	wait, cancel := context.WithTimeout(ctx, rmqRouteWait)
	defer cancel()
	var last error
	for {
		for _, ns := range p.cfg.NameServers {
			route, err := p.admin.Route(wait, ns, topic)
			if err != nil {
				last = err
				continue
			}
			missing := 0
			for _, b := range p.brokers {
				if route[b.Name] == 0 {
					missing++
				}
			}
			if missing == 0 {
				return nil
			}
			last = fmt.Errorf("name server %s routes topic to %d of %d brokers", ns, len(p.brokers)-missing, len(p.brokers))
		}
		select {
		case <-wait.Done():
			if ctx.Err() != nil {
				return publishers.CtxErr(ctx)
			}
			return publishers.Wrap(publishers.ErrUnavailable, fmt.Errorf("topic %s not routed after creation: %v", topic, last))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Ping asks host's master for its runtime info on a connection of its own.
func (p *Publisher) Ping(ctx context.Context, host int) error {
	// rocketmq-client-go tells no news of its connections: no events
	return p.pingWith(ctx, host, nil)
}

// pingWith is Ping with events, the host's connection news (nil: none, results are never reused).
func (p *Publisher) pingWith(ctx context.Context, host int, events func(int) uint64) error {
	if host < 0 || host >= len(p.brokers) {
		return fmt.Errorf("rocketmq: host %d out of range (%d brokers)", host, len(p.brokers))
	}
	return p.pings.Do(ctx, host, events, p.ping)
}

func (p *Publisher) ping(ctx context.Context, host int) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.SendTimeout)
	defer cancel()
	v, err := p.admin.BrokerVersion(ctx, p.brokers[host].Addr)
	if err != nil {
		if ctx.Err() != nil {
			return publishers.CtxErr(ctx)
		}
		if rmqLoginRefused(err) {
			return errRMQLoginRefused(p.cfg, err)
		}
		return publishers.Wrap(publishers.ErrUnavailable, err)
	}
	p.versions.Set(p.brokers[host].Addr, v)
	return nil
}

// Close fails every publish still pending with ErrClosed and shuts every producer down; it is
// idempotent, and a concurrent call returns when the first has finished.
func (p *Publisher) Close() error { return p.closeWith(nil) }

// closeWith is Close running first, once the publisher counts as closed, what only the native path
// has to stop.
func (p *Publisher) closeWith(first func()) error {
	p.mu.Lock()
	if p.closed.Swap(true) {
		p.mu.Unlock()
		<-p.closing
		return nil
	}
	p.mu.Unlock()
	defer close(p.closing)
	if p.creations != nil { // nil in tests that build a Publisher by hand
		p.creations.Close()
	}
	if first != nil {
		first()
	}
	p.gate.Lock() // every send inside the client has registered itself; none enters any more
	p.gate.Unlock()
	p.pmu.Lock()
	pending := p.pending
	p.pending = map[*rmqPending]struct{}{}
	p.pmu.Unlock()
	for q := range pending {
		q.finish(nil, publishers.ErrClosed)
	}
	if p.handoffs != nil { // nil in tests that build a Publisher by hand
		// what is left of them only sees closed (the gate above waited for those inside the client)
		p.handoffs.Close()
	}
	// The client's goroutines of those sends end with their callbacks (dropped: finished above), on
	// the broker's answer or at their deadline, within send_timeout. Not cancelled earlier: the client
	// reads a response that arrives as the wait is cancelled without synchronisation (a data race).
	waitBounded(&p.inClient, p.cfg.SendTimeout+time.Second)
	p.bg.Wait()
	for _, s := range p.slots {
		s.mu.Lock()
		if pr := s.cur.Load(); pr != nil {
			p.shutdown(pr)
		}
		s.mu.Unlock()
	}
	p.mu.Lock()
	retired := p.retired
	p.retired = nil
	p.mu.Unlock()
	for _, r := range retired {
		r.timer.Stop()
		p.shutdown(r.pr) // idempotent, also when the timer already ran
	}
	rlogTarget.CompareAndSwap(p.rlog, nil)
	return nil
}

// waitBounded waits for wg, at most d.
func waitBounded(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// ---------------------------------------------------------------- client logging

// rocketmq-client-go logs through one package-global logger (rlog.SetLogger), shared by every client in
// the process; it is replaced once with an adapter that forwards to the logger of the most recently
// started publisher, at warn level or quieter: the client's errors are mostly the failures that
// publishers already return, and under load they would flood the log.
var (
	rlogOnce   sync.Once
	rlogTarget atomic.Pointer[slog.Logger]
)

func routeRlog(log *slog.Logger) *slog.Logger {
	l := log.With("component", "rocketmq-client")
	rlogTarget.Store(l)
	rlogOnce.Do(func() {
		rlog.SetLogger(rlogAdapter{})
		// the client recovers panics in its goroutines; log them instead of dropping them silently
		primitive.DefaultPanicHandler = func(v interface{}) {
			rlogEmit(slog.LevelWarn, "rocketmq client: recovered panic", map[string]interface{}{"panic": fmt.Sprint(v)})
		}
	})
	return l
}

type rlogAdapter struct{}

func (rlogAdapter) Debug(msg string, f map[string]interface{})   { rlogEmit(slog.LevelDebug, msg, f) }
func (rlogAdapter) Info(msg string, f map[string]interface{})    { rlogEmit(slog.LevelDebug, msg, f) }
func (rlogAdapter) Warning(msg string, f map[string]interface{}) { rlogEmit(slog.LevelInfo, msg, f) }
func (rlogAdapter) Error(msg string, f map[string]interface{})   { rlogEmit(slog.LevelWarn, msg, f) }
func (rlogAdapter) Fatal(msg string, f map[string]interface{})   { rlogEmit(slog.LevelWarn, msg, f) }
func (rlogAdapter) Level(string)                                 {}
func (rlogAdapter) OutputPath(string) error                      { return nil }

func rlogEmit(level slog.Level, msg string, fields map[string]interface{}) {
	log := rlogTarget.Load()
	if log == nil || !log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		attrs = append(attrs, k, v)
	}
	log.Log(context.Background(), level, msg, attrs...)
}
