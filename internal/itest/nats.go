package itest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/testport"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
)

// NATS is the Harness for nats-servers (JetStream on) of scripts/nats.sh that the test starts itself,
// each on free loopback ports with its data in a test temp dir: the suite stops, kills and freezes
// them, which the servers scripts/test.sh starts for publishers/nats (a package whose tests run at the
// same time as these) must not see. What a server holds is counted by its monitor's /jsz.
type NATS struct {
	Addrs    []string // client addresses, as mqtarget names the hosts
	Monitors []string // monitor addresses, in the same order
	Ctl      []ScriptBroker
}

// NewNATS starts n nats-servers (in parallel) and stops them at cleanup.
func NewNATS(t testing.TB, n int) *NATS {
	t.Helper()
	h := &NATS{}
	for range n {
		addr, mon, data := testport.Addr(t), testport.Addr(t), t.TempDir()
		_, port, _ := net.SplitHostPort(addr)
		_, monPort, _ := net.SplitHostPort(mon)
		h.Addrs, h.Monitors = append(h.Addrs, addr), append(h.Monitors, mon)
		h.Ctl = append(h.Ctl, ScriptBroker{Script: scriptPath("nats"), PIDFile: filepath.Join(data, "mqtarget-broker.pid"),
			Env: []string{"NATS_PORT=" + port, "NATS_MONITOR_PORT=" + monPort, "NATS_DATA=" + data}})
	}
	startAll(t, h.Ctl)
	return h
}

// startAll starts every broker through its script at once, and stops each through it at cleanup.
func startAll(t testing.TB, ctl []ScriptBroker) {
	t.Helper()
	for _, b := range ctl {
		t.Cleanup(func() { b.Stop(t) }) // first: a start that fails half-way leaves nothing running
	}
	errs := make([]error, len(ctl))
	var wg sync.WaitGroup
	for i, b := range ctl {
		wg.Go(func() { errs[i] = b.start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// start is Start without a testing.TB, for starting several brokers at once.
func (b ScriptBroker) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", b.Script, "start")
	c.Env = append(os.Environ(), b.Env...)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s start (%v): %w\n%s", b.Script, b.Env, err, out)
	}
	return nil
}

// scriptPath is scripts/NAME.sh of this repository, absolute.
func scriptPath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", name+".sh")
}

// runScript runs script with args and env added to ours, bounded by timeout, and returns its stdout;
// a failure fails t with the script's stderr.
func runScript(t testing.TB, script string, env []string, timeout time.Duration, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s", filepath.Base(script), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func (h *NATS) Broker() string                 { return "nats" }
func (h *NATS) InvalidTopic() string           { return "bad%20topic" }
func (h *NATS) Hosts() []string                { return h.Addrs }
func (h *NATS) Configure(cfg *config.Config)   { cfg.NATS.Servers = h.Addrs }
func (h *NATS) CanStop() bool                  { return true }
func (h *NATS) StopHost(t testing.TB, i int)   { t.Helper(); h.Ctl[i].Stop(t) }
func (h *NATS) StartHost(t testing.TB, i int)  { t.Helper(); h.Ctl[i].Start(t) }
func (h *NATS) FreezeHost(t testing.TB, i int) { t.Helper(); h.Ctl[i].Freeze(t) }
func (h *NATS) ThawHost(t testing.TB, i int)   { t.Helper(); h.Ctl[i].Thaw(t) }
func (h *NATS) KillHost(t testing.TB, i int)   { t.Helper(); h.Ctl[i].Kill(t) }

// Stored is the message count of topic's stream (nats.StreamName) as host's /jsz?streams=true reports
// it: every message the stream holds, read or not (a consumer's acks remove nothing under its default
// limits retention); 0 when there is no such stream.
func (h *NATS) Stored(t testing.TB, host int, topic string) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	n, err := nats.StreamMessages(t.Context(), c, h.Monitors[host], nats.StreamName(topic))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Consume reads topic's stream on host with the product's consumer under a durable consumer name of
// its own (so it starts at the stream's first message and can be repeated), until want arrived or the
// deadline passed.
func (h *NATS) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	return h.consume(t, host, topic, want, 0, deadline)
}

func (h *NATS) consume(t testing.TB, host int, topic string, want int, grace, deadline time.Duration) [][]byte {
	t.Helper()
	cfg := nats.DefaultConfig()
	cfg.Servers = h.Addrs[host : host+1]
	cons, err := nats.NewConsumer(cfg, publishers.ConsumerOptions{Group: "itest-" + randomHex(4)}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	return collect(t, cons, 0, topic, want, grace, deadline)
}

// ConsumeAll reads every message of topic's stream on host: as many as /jsz counts, and whatever
// follows within 300 ms.
func (h *NATS) ConsumeAll(t testing.TB, host int, topic string, atLeast int) [][]byte {
	t.Helper()
	n := h.Stored(t, host, topic)
	if n < atLeast {
		t.Errorf("nats %s: /jsz counts %d messages in %s, at least %d expected", h.Addrs[host], n, nats.StreamName(topic), atLeast)
	}
	return h.consume(t, host, topic, n, 300*time.Millisecond, 20*time.Second)
}
