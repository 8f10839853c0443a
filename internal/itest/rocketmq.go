package itest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
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
}

// RocketMQQueues is the queue count of the topics the tests create (fewer queues: faster read-back).
const RocketMQQueues = 4

// NewRocketMQ discovers the brokers registered in the name server at namesrv.
func NewRocketMQ(t testing.TB, namesrv string) *RocketMQ {
	t.Helper()
	h := &RocketMQ{NameSrv: namesrv}
	testwait.Until(t, 30*time.Second, "RocketMQ brokers registered in "+namesrv, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b, err := h.admin.Brokers(ctx, namesrv)
		if err != nil {
			return err
		}
		if len(b) < 2 {
			return fmt.Errorf("%d brokers registered (%v), want at least 2", len(b), b)
		}
		h.Brokers = b
		return nil
	})
	return h
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

// Consume reads topic's messages from every queue of host's broker, from the start, until want have
// arrived (and 300 ms more, for extras) or the deadline passes. Reading commits no offsets, so it can be
// repeated.
func (h *RocketMQ) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	cfg := rocketmq.DefaultConfig()
	cfg.NameServers = []string{h.NameSrv}
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

// rocketmqScript runs scripts/rocketmq.sh with args, bounded by timeout, and returns its stdout.
func rocketmqScript(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "rocketmq.sh")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Args = append(cmd.Args, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/rocketmq.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func (h *RocketMQ) StopHost(t testing.TB, host int) {
	t.Helper()
	rocketmqScript(t, 2*time.Minute, "stop-broker", h.Brokers[host].Name)
}

func (h *RocketMQ) StartHost(t testing.TB, host int) {
	t.Helper()
	rocketmqScript(t, 4*time.Minute, "start-broker", h.Brokers[host].Name)
}

// LaunchHost starts the broker (scripts/rocketmq.sh launch-broker) and returns once the name server
// lists it again: the fault tests see it take messages under their load, without start-broker's probes.
func (h *RocketMQ) LaunchHost(t testing.TB, host int) {
	t.Helper()
	b := h.Brokers[host]
	rocketmqScript(t, time.Minute, "launch-broker", b.Name)
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
	pid, err := strconv.Atoi(strings.TrimSpace(rocketmqScript(t, 30*time.Second, "pid", h.Brokers[host].Name)))
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
