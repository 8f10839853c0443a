package itest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

// RocketMQ is the Harness for the local RocketMQ cluster of scripts/rocketmq.sh: one name server and
// brokers broker-a and broker-b. Hosts are the brokers as mqtarget names them (name@address, sorted).
type RocketMQ struct {
	NameSrv string
	Brokers []admin.Broker
	admin   admin.Client
	// Login is the ACL user mqtarget and the harness sign as (the ROCKETMQ_AUTH cluster's super
	// user); empty on a cluster without ACL.
	Login admin.Credentials
	env   []string // scripts/rocketmq.sh's variables for this cluster (none: the default one)
}

// RocketMQQueues is the queue count of the topics the tests create (fewer queues: faster read-back).
const RocketMQQueues = 4

// NewRocketMQ discovers the brokers registered in the name server at namesrv.
func NewRocketMQ(t testing.TB, namesrv string) *RocketMQ {
	t.Helper()
	h := &RocketMQ{NameSrv: namesrv}
	h.discover(t, 2)
	return h
}

// NewRocketMQACL is the harness of the RocketMQ with ACL 2.0 that scripts/test.sh starts beside the
// first (MQTARGET_ROCKETMQ_ACL_NAMESRV; its super user's USER:PASSWORD in MQTARGET_ROCKETMQ_ACL_LOGIN,
// its scripts/rocketmq.sh variables in MQTARGET_ROCKETMQ_ACL_ENV): one broker, broker-a.
func NewRocketMQACL(t testing.TB) *RocketMQ {
	t.Helper()
	const hint = "scripts/test.sh starts a RocketMQ with ROCKETMQ_AUTH and sets it"
	h := &RocketMQ{NameSrv: SetEnv(t, "MQTARGET_ROCKETMQ_ACL_NAMESRV", hint)}
	user, pass, ok := strings.Cut(SetEnv(t, "MQTARGET_ROCKETMQ_ACL_LOGIN", hint), ":")
	if !ok {
		t.Fatal("MQTARGET_ROCKETMQ_ACL_LOGIN: want USER:PASSWORD")
	}
	h.Login = admin.Credentials{AccessKey: user, SecretKey: pass}
	h.admin.Creds = h.Login
	h.env = strings.Fields(SetEnv(t, "MQTARGET_ROCKETMQ_ACL_ENV", hint))
	h.discover(t, 1)
	return h
}

// discover waits until at least atLeast brokers are registered in the name server.
func (h *RocketMQ) discover(t testing.TB, atLeast int) {
	t.Helper()
	namesrv := h.NameSrv
	testwait.Until(t, 30*time.Second, "RocketMQ brokers registered in "+namesrv, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b, err := h.admin.Brokers(ctx, namesrv)
		if err != nil {
			return err
		}
		if len(b) < atLeast {
			return fmt.Errorf("%d brokers registered (%v), want at least %d", len(b), b, atLeast)
		}
		h.Brokers = b
		return nil
	})
}

func (h *RocketMQ) Broker() string       { return "rocketmq" }
func (h *RocketMQ) InvalidTopic() string { return "bad%20topic" }
func (h *RocketMQ) CanStop() bool        { return true }

func (h *RocketMQ) Hosts() []string {
	out := make([]string, len(h.Brokers))
	for i, b := range h.Brokers {
		out[i] = b.String()
	}
	return out
}

func (h *RocketMQ) Configure(cfg *config.Config) {
	cfg.RocketMQ.NameServers = []string{h.NameSrv}
	cfg.RocketMQ.CreateTopics = true // the suite's fresh topics then exist on every broker
	cfg.RocketMQ.Queues = RocketMQQueues
	cfg.RocketMQ.AccessKey, cfg.RocketMQ.SecretKey = h.Login.AccessKey, publishers.Secret(h.Login.SecretKey)
}

// BadLogin implements LoginRefuser on a cluster with ACL: the right user with a wrong secret. Topics
// are not created at start: that would fail the start (TestIntegrationACL checks it), and the check is
// of the answers to requests.
func (h *RocketMQ) BadLogin(cfg *config.Config) bool {
	if h.Login.AccessKey == "" {
		return false
	}
	h.Configure(cfg)
	cfg.RocketMQ.SecretKey += "-wrong"
	cfg.RocketMQ.CreateTopics = false
	return true
}

// AddUser creates a user on every broker (scripts/rocketmq.sh mqadmin, as the super user) that may
// publish to topic and nothing else.
func (h *RocketMQ) AddUser(t testing.TB, user, pass, topic string) {
	t.Helper()
	for _, b := range h.Brokers {
		h.script(t, 2*time.Minute, "mqadmin", "createUser", "-b", b.Addr, "-u", user, "-p", pass)
		h.script(t, 2*time.Minute, "mqadmin", "createAcl", "-b", b.Addr, "-s", "User:"+user, "-r", "Topic:"+topic, "-a", "Pub", "-d", "Allow")
	}
}

// queues returns how many queues topic has on host's broker, by the name server's route (0: none).
func (h *RocketMQ) queues(t testing.TB, host int, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	route, err := h.admin.Route(ctx, h.NameSrv, topic)
	if err != nil {
		t.Fatalf("route of %s: %v", topic, err)
	}
	return route[h.Brokers[host].Name]
}

// Stored returns how many messages host's broker ever stored on topic: the sum of its queues' max offsets.
func (h *RocketMQ) Stored(t testing.TB, host int, topic string) int {
	t.Helper()
	n := h.queues(t, host, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	total := 0
	for q := range n {
		off, err := h.admin.MaxOffset(ctx, h.Brokers[host].Addr, topic, q)
		if err != nil {
			t.Fatalf("max offset of %s queue %d on %s: %v", topic, q, h.Brokers[host], err)
		}
		total += int(off)
	}
	return total
}

// SetBrokerConfig sets one setting of host's broker while it runs (mqadmin updateBrokerConfig: the
// broker's UPDATE_BROKER_CONFIG request) and puts the broker's value back when the test ends.
func (h *RocketMQ) SetBrokerConfig(t testing.TB, host int, key, value string) {
	t.Helper()
	const getBrokerConfig, updateBrokerConfig = 26, 25 // RequestCode
	call := func(code int, body []byte) *admin.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := h.admin.Call(ctx, h.Brokers[host].Addr, code, nil, body)
		if err == nil && resp.Code != 0 {
			err = &admin.CodeError{Code: resp.Code, Remark: resp.Remark}
		}
		if err != nil {
			t.Fatalf("%s: request %d (%s): %v", h.Brokers[host], code, body, err)
		}
		return resp
	}
	was := ""
	for line := range strings.Lines(string(call(getBrokerConfig, nil).Body)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k == key {
			was = v
		}
	}
	if was == "" {
		t.Fatalf("%s has no setting %s", h.Brokers[host], key)
	}
	call(updateBrokerConfig, []byte(key+"="+value+"\n"))
	t.Cleanup(func() { call(updateBrokerConfig, []byte(key+"="+was+"\n")) })
}

// Consume reads topic's messages from every queue of host's broker, from the start, until want have
// arrived (and 300 ms more, for extras) or the deadline passes. Reading commits no offsets, so it can be
// repeated.
func (h *RocketMQ) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	cfg := rocketmq.DefaultConfig()
	cfg.NameServers = []string{h.NameSrv}
	cfg.AccessKey, cfg.SecretKey = h.Login.AccessKey, publishers.Secret(h.Login.SecretKey)
	cons, err := rocketmq.NewConsumer(cfg, publishers.ConsumerOptions{Group: "mqtarget-itest"}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if got, want := cons.Hosts()[host], h.Brokers[host].String(); got != want {
		t.Fatalf("consumer host %d is %s, the harness's %s", host, got, want)
	}
	return collect(t, cons, host, topic, want, 300*time.Millisecond, deadline)
}

// script runs scripts/rocketmq.sh with args and the cluster's variables, bounded by timeout, and
// returns its stdout.
func (h *RocketMQ) script(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	return string(runScript(t, scriptPath("rocketmq"), h.env, timeout, args...))
}

func (h *RocketMQ) StopHost(t testing.TB, host int) {
	t.Helper()
	h.script(t, 2*time.Minute, "stop-broker", h.Brokers[host].Name)
}

func (h *RocketMQ) StartHost(t testing.TB, host int) {
	t.Helper()
	h.script(t, 4*time.Minute, "start-broker", h.Brokers[host].Name)
}

// LaunchHost starts the broker (scripts/rocketmq.sh launch-broker) and returns once the name server
// lists it again: the fault tests see it take messages under their load, without start-broker's probes.
func (h *RocketMQ) LaunchHost(t testing.TB, host int) {
	t.Helper()
	b := h.Brokers[host]
	h.script(t, time.Minute, "launch-broker", b.Name)
	testwait.Until(t, 4*time.Minute, b.String()+" registered again (its log: $ROCKETMQ_DATA/"+b.Name+"/"+b.Name+".out)", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		brokers, err := h.admin.Brokers(ctx, h.NameSrv)
		if err != nil {
			return err
		}
		if !slices.Contains(brokers, b) {
			return fmt.Errorf("name server lists %v", brokers)
		}
		return nil
	})
}

func (h *RocketMQ) pid(t testing.TB, host int) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(h.script(t, 30*time.Second, "pid", h.Brokers[host].Name)))
	if err != nil {
		t.Fatalf("pid of %s: %v", h.Brokers[host].Name, err)
	}
	return pid
}

// FreezeHost stops the broker's JVM with SIGSTOP: connections stay open and nothing is answered.
func (h *RocketMQ) FreezeHost(t testing.TB, host int) {
	t.Helper()
	publishertest.Freeze(t, h.pid(t, host))
}
func (h *RocketMQ) ThawHost(t testing.TB, host int) {
	must(t, syscall.Kill(h.pid(t, host), syscall.SIGCONT))
}

// KillHost sends SIGKILL to the broker's JVM and returns once it is gone; StartHost or LaunchHost
// restarts it.
func (h *RocketMQ) KillHost(t testing.TB, host int) {
	t.Helper()
	pid := h.pid(t, host)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	testwait.Until(t, 10*time.Second, fmt.Sprintf("%s (pid %d) gone after SIGKILL", h.Brokers[host].Name, pid),
		func() error { return gone(pid) })
	// What the name server says right after the crash: mqtarget keeps the broker's address either way.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := h.admin.Brokers(ctx, h.NameSrv)
	t.Logf("name server after killing %s: brokers %v (%v)", h.Brokers[host].Name, b, err)
}

// ConsumeAll reads every message host's broker holds on topic: as many as its queues' max offsets say.
func (h *RocketMQ) ConsumeAll(t testing.TB, host int, topic string, atLeast int) [][]byte {
	t.Helper()
	n := h.Stored(t, host, topic)
	if n < atLeast {
		t.Errorf("%s holds %d messages on %s, at least %d expected", h.Brokers[host], n, topic, atLeast)
	}
	return h.Consume(t, host, topic, n, 20*time.Second)
}

// RocketMQNamesrv returns the name server of the local RocketMQ that scripts/test.sh started
// (scripts/rocketmq.sh start); with MQTARGET_INTEGRATION set it must be given.
func RocketMQNamesrv(t testing.TB) string {
	t.Helper()
	return SetEnv(t, "MQTARGET_ROCKETMQ_NAMESRV", "scripts/test.sh starts RocketMQ with scripts/rocketmq.sh and sets it")
}
