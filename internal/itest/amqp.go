package itest

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/rabbitmqctl"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/amqp"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// AMQP is the Harness for RabbitMQ over AMQP 0-9-1: the node scripts/test.sh starts with
// scripts/rabbitmq.sh, shared with that node's other protocol's tests, each URL of MQTARGET_AMQP_TEST_URLS a vhost of it
// that stands for an independent server (a queue of one vhost is not seen from another). What a
// queue holds is counted by the broker: queue.declare passive (the management-free equivalent of
// `rabbitmqctl list_queues name messages`, in milliseconds where rabbitmqctl takes seconds) and
// rabbitmqctl itself in TestAMQP's ledger. Freezing the node (SIGSTOP) freezes every host; stopping or
// killing it restarts an Erlang node (tens of seconds, and the broker of the other protocol's tests): only with
// MQTARGET_AMQP_KILL set.
type AMQP struct {
	URLs   []string
	Kill   bool         // the node may be stopped, killed and restarted
	Ctl    ScriptBroker // the node: stop and start by scripts/rabbitmq.sh, freeze and kill by its PID file
	names  []string     // hosts as mqtarget names them
	vhosts []string

	mu       sync.Mutex
	consumed map[key]int // messages Consume took per host and topic, for Stored
}

// NewAMQP is the harness over MQTARGET_AMQP_TEST_URLS, making each URL's vhost when it is missing.
func NewAMQP(t testing.TB) *AMQP {
	t.Helper()
	Integration(t)
	urls, data := os.Getenv("MQTARGET_AMQP_TEST_URLS"), os.Getenv("RABBITMQ_DATA")
	if urls == "" || data == "" {
		t.Fatal("MQTARGET_AMQP_TEST_URLS and RABBITMQ_DATA are not set (scripts/test.sh starts RabbitMQ with scripts/rabbitmq.sh and sets them)")
	}
	h := &AMQP{URLs: strings.Split(urls, ","), Kill: os.Getenv("MQTARGET_AMQP_KILL") != "",
		Ctl:      ScriptBroker{Script: scriptPath("rabbitmq"), PIDFile: filepath.Join(data, "mqtarget-broker.pid")},
		consumed: map[key]int{}}
	cfg := amqp.DefaultConfig()
	cfg.URLs = h.URLs
	cons, err := amqp.NewConsumer(cfg, publishers.ConsumerOptions{}, nil) // connects in Consume only
	if err != nil {
		t.Fatalf("MQTARGET_AMQP_TEST_URLS: %v", err)
	}
	h.names = cons.Hosts()
	_ = cons.Close()
	for _, raw := range h.URLs {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		vhost, _ := url.PathUnescape(strings.TrimPrefix(u.EscapedPath(), "/"))
		if vhost == "" {
			vhost = "/"
		}
		h.vhosts = append(h.vhosts, vhost)
		if conn, err := amqp091.Dial(raw); err == nil {
			_ = conn.Close()
			continue
		}
		// Most likely the vhost is missing. publishers/amqp's tests make it too, maybe at the same
		// time: add_vhost failing because it exists is fine, set_permissions must not fail.
		_, _ = h.node().Run("add_vhost", vhost)
		h.ctl(t, "set_permissions", "-p", vhost, u.User.Username(), ".*", ".*", ".*")
	}
	return h
}

// ctl runs rabbitmqctl ARGS against the node and returns its output.
func (h *AMQP) ctl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := h.node().Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *AMQP) node() rabbitmqctl.Node { return rabbitmqctl.Node{Script: h.Ctl.Script, Env: h.Ctl.Env} }

func (h *AMQP) Broker() string               { return "amqp" }
func (h *AMQP) InvalidTopic() string         { return "amq.reserved" } // the broker's own names
func (h *AMQP) Hosts() []string              { return h.names }
func (h *AMQP) Configure(cfg *config.Config) { cfg.AMQP.URLs = h.URLs }

// BadLogin: every URL with a wrong password.
func (h *AMQP) BadLogin(cfg *config.Config) bool {
	cfg.AMQP.URLs = nil
	for _, raw := range h.URLs {
		u, err := url.Parse(raw)
		if err != nil {
			panic(err) // NewAMQP parsed them
		}
		pass, _ := u.User.Password()
		u.User = url.UserPassword(u.User.Username(), pass+"-wrong")
		cfg.AMQP.URLs = append(cfg.AMQP.URLs, u.String())
	}
	// Shorter than PublishTimeout (2 s, the dial timeout's default): a publish that waits for a redial
	// RabbitMQ answers slowly (a CI run on 2 busy cores) gets the dial's failure, 503, before its own
	// deadline's 504.
	cfg.AMQP.DialTimeout = time.Second
	return true
}

func (h *AMQP) CanStop() bool { return true } // frozen at least; stopped with Kill

// mayKill skips the test unless the node may be restarted.
func (h *AMQP) mayKill(t testing.TB) {
	t.Helper()
	if !h.Kill {
		t.Skip("stops the RabbitMQ node the other protocol's tests share: set MQTARGET_AMQP_KILL=1 to run it")
	}
}

func (h *AMQP) StopHost(t testing.TB, _ int)   { t.Helper(); h.mayKill(t); h.Ctl.Stop(t) }
func (h *AMQP) StartHost(t testing.TB, _ int)  { t.Helper(); h.Ctl.Start(t) }
func (h *AMQP) KillHost(t testing.TB, _ int)   { t.Helper(); h.mayKill(t); h.Ctl.Kill(t) }
func (h *AMQP) FreezeHost(t testing.TB, _ int) { t.Helper(); publishertest.Freeze(t, h.Ctl.pid(t)) }
func (h *AMQP) ThawHost(t testing.TB, _ int) {
	t.Helper()
	must(t, syscall.Kill(h.Ctl.pid(t), syscall.SIGCONT))
}

// RecoveryReport implements recoveryReporter: the last lines of the node's log (scripts/rabbitmq.sh keeps it
// beside the PID file) that tell what a recovery after an unclean shutdown did, such as "Queue X in
// vhost / dropped 0/12/0 persistent messages and 0 transient messages after unclean shutdown".
func (h *AMQP) RecoveryReport(t testing.TB) string {
	t.Helper()
	return publishertest.LogLines(filepath.Join(filepath.Dir(h.Ctl.PIDFile), "log", "mqtarget-run.log"), 40,
		"unclean", "dropped", "recover", "rebuilding", "database")
}

// queued is how many ready messages queue topic holds on host, by a passive queue.declare; 0 when
// there is no such queue.
func (h *AMQP) queued(t testing.TB, host int, topic string) int {
	t.Helper()
	n, _ := h.declarePassive(t, host, topic, nil)
	return n
}

// declarePassive asks host for queue topic over a connection of its own: its ready messages, and
// whether it exists. When it exists and then is not nil, then runs on the connection's channel.
func (h *AMQP) declarePassive(t testing.TB, host int, topic string, then func(*amqp091.Channel)) (int, bool) {
	t.Helper()
	conn, err := amqp091.DialConfig(h.URLs[host], amqp091.Config{Dial: amqp091.DefaultDial(10 * time.Second)})
	if err != nil {
		t.Fatalf("amqp %s: %v", h.names[host], err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("amqp %s: %v", h.names[host], err)
	}
	q, err := ch.QueueDeclarePassive(topic, true, false, false, false, nil)
	var ae *amqp091.Error
	if errors.As(err, &ae) && ae.Code == amqp091.NotFound {
		return 0, false
	}
	if err != nil {
		t.Fatalf("amqp %s: passive declare of %s: %v", h.names[host], topic, err)
	}
	if then != nil {
		then(ch)
	}
	return q.Messages, true
}

// TopicDurable implements TopicLoser: queue topic exists on host and is durable, which declaring it
// non-durable tells (406 PRECONDITION_FAILED, inequivalent arg 'durable').
func (h *AMQP) TopicDurable(t testing.TB, host int, topic string) bool {
	t.Helper()
	durable := false
	_, exists := h.declarePassive(t, host, topic, func(ch *amqp091.Channel) {
		_, err := ch.QueueDeclare(topic, false, false, false, false, nil)
		var ae *amqp091.Error
		durable = errors.As(err, &ae) && ae.Code == amqp091.PreconditionFailed && strings.Contains(ae.Reason, "durable")
	})
	return exists && durable
}

// Stored is every message queue topic on host took: what Consume read from it so far plus what it
// still holds.
func (h *AMQP) Stored(t testing.TB, host int, topic string) int {
	t.Helper()
	n := h.queued(t, host, topic)
	h.mu.Lock()
	defer h.mu.Unlock()
	return n + h.consumed[key{host, topic}]
}

// Consume takes messages from queue topic on host with the product's consumer (acknowledging them)
// until want arrived or the deadline passed; what it prefetched beyond goes back to the queue.
func (h *AMQP) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	return h.consume(t, host, topic, want, 0, deadline)
}

func (h *AMQP) consume(t testing.TB, host int, topic string, want int, grace, deadline time.Duration) [][]byte {
	t.Helper()
	cfg := amqp.DefaultConfig()
	cfg.URLs = h.URLs[host : host+1]
	cons, err := amqp.NewConsumer(cfg, publishers.ConsumerOptions{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := collect(t, cons, 0, topic, want, grace, deadline)
	h.mu.Lock()
	h.consumed[key{host, topic}] += len(got)
	h.mu.Unlock()
	return got
}

// ConsumeAll takes every message queue topic on host holds, and whatever follows within 300 ms.
func (h *AMQP) ConsumeAll(t testing.TB, host int, topic string, atLeast int) [][]byte {
	t.Helper()
	n := h.queued(t, host, topic)
	if n < atLeast {
		t.Errorf("amqp %s: queue %s holds %d messages, at least %d expected", h.names[host], topic, n, atLeast)
	}
	return h.consume(t, host, topic, n, 300*time.Millisecond, 20*time.Second)
}
