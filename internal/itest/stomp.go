package itest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// STOMP is the Harness for a set of STOMP brokers sharing one login: embedded go-stomp servers, ActiveMQ
// Artemis, ActiveMQ Classic, RabbitMQ, or a mix. Every host must be a distinct broker, so that what a
// consumer finds on host i's queue landed there through host i.
type STOMP struct {
	Addrs      []string
	Login      string
	Passcode   string
	Persistent bool                 // configure mqtarget with stomp.persistent
	VHost      string               // CONNECT host header (stomp.vhost; RabbitMQ: "/"); empty: 127.0.0.1
	Ctl        []BrokerControl      // per host; nil (or a nil entry) when the broker cannot be stopped
	TLS        publishers.TLSConfig // mqtarget's and the harness's stomp.tls* settings

	mu       sync.Mutex
	consumed map[key]int // messages Consume took per host and topic, for Stored
}

// BrokerControl stops, starts, freezes and thaws one broker.
type BrokerControl interface {
	Stop(t testing.TB)
	Start(t testing.TB)
	Freeze(t testing.TB)
	Thaw(t testing.TB)
}

const stompPrefix = "/queue/"

func (h *STOMP) Broker() string { return "stomp" }

// InvalidTopic starts with '/': the topic is the name, stomp.prefix supplies /queue/.
func (h *STOMP) InvalidTopic() string { return "%2Fqueue%2Fx" }
func (h *STOMP) Hosts() []string      { return h.Addrs }
func (h *STOMP) Configure(cfg *config.Config) {
	cfg.STOMP.Hosts = h.Addrs
	cfg.STOMP.Login = h.Login
	cfg.STOMP.Passcode = publishers.Secret(h.Passcode)
	cfg.STOMP.Prefix = stompPrefix
	cfg.STOMP.Persistent = h.Persistent
	cfg.STOMP.VHost = h.VHost
	cfg.STOMP.TLSConfig = h.TLS
}

// BadLogin: a wrong passcode for the login the broker requires (an embedded go-stomp server takes any).
func (h *STOMP) BadLogin(cfg *config.Config) bool {
	if h.Login == "" {
		return false
	}
	cfg.STOMP.Passcode = publishers.Secret(h.Passcode + "-wrong")
	return true
}

func (h *STOMP) CanStop() bool                  { return len(h.Ctl) > 0 && h.Ctl[0] != nil }
func (h *STOMP) StopHost(t testing.TB, i int)   { h.Ctl[i].Stop(t) }
func (h *STOMP) StartHost(t testing.TB, i int)  { h.Ctl[i].Start(t) }
func (h *STOMP) FreezeHost(t testing.TB, i int) { h.Ctl[i].Freeze(t) }
func (h *STOMP) ThawHost(t testing.TB, i int)   { h.Ctl[i].Thaw(t) }

// Stored is what Consume took from topic on host so far plus what is still queued there (drained now):
// every message the broker accepted on that queue.
func (h *STOMP) Stored(t testing.TB, host int, topic string) int {
	t.Helper()
	h.Consume(t, host, topic, 0, 20*time.Second)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.consumed[key{host, topic}]
}

// Consume drains the queue topic on host: it consumes with the product's STOMP consumer and sends a
// sentinel message to the same queue on a connection of its own, collecting messages until the sentinel
// arrives. Queues are FIFO for a single consumer, so everything queued before the sentinel (every
// acknowledged message) has then been seen, and duplicates or extras are returned too rather than missed.
// While fewer than want messages came (async publishes may still be on their way), it sends another
// sentinel and goes on, until the deadline; a deadline passing with no sentinel back fails the test.
// Leaving, the consumer UNSUBSCRIBEs and handles what the broker still dispatched until its DISCONNECT
// receipt, so nothing is dropped with the connection (see stomp.Consumer).
func (h *STOMP) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	dest := stompPrefix + topic
	end := time.Now().Add(deadline)
	cfg := stomp.DefaultConfig()
	cfg.Hosts = []string{h.Addrs[host]}
	cfg.Login, cfg.Passcode, cfg.VHost, cfg.Prefix = h.Login, publishers.Secret(h.Passcode), h.VHost, stompPrefix
	if cfg.VHost == "" {
		cfg.VHost = "127.0.0.1"
	}
	cfg.DialTimeout = 10 * time.Second
	cfg.TLSConfig = h.TLS
	cons, err := stomp.NewConsumer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var (
		mu      sync.Mutex
		got     [][]byte
		waiting string // the sentinel body awaited
	)
	back := make(chan struct{}, 1)
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Consume(ctx, topic, func(d publishers.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			if !bytes.HasPrefix(d.Body, []byte(sentinelBody)) {
				got = append(got, d.Body)
			} else if string(d.Body) == waiting {
				select {
				case back <- struct{}{}:
				default: // a redelivered sentinel
				}
			}
		})
	}()
	finish := func() [][]byte {
		cancel()
		if err := <-ended; err != nil {
			t.Fatalf("consuming %s on %s: %v", dest, h.Addrs[host], err)
		}
		mu.Lock()
		defer mu.Unlock()
		h.mu.Lock()
		if h.consumed == nil {
			h.consumed = map[key]int{}
		}
		h.consumed[key{host, topic}] += len(got)
		h.mu.Unlock()
		return got
	}
	for {
		sentinel := sentinelBody + randomHex(8)
		mu.Lock()
		waiting = sentinel
		mu.Unlock()
		h.sendSentinel(t, host, dest, sentinel, end)
		select {
		case <-back:
		case err := <-ended:
			t.Fatalf("consuming %s on %s: %v", dest, h.Addrs[host], err)
		case <-ctx.Done():
			mu.Lock()
			n := len(got)
			mu.Unlock()
			t.Errorf("draining %s on %s: sentinel not back within %v (%d messages so far)", dest, h.Addrs[host], deadline, n)
			return finish()
		}
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= want || !time.Now().Add(100*time.Millisecond).Before(end) {
			return finish()
		}
		time.Sleep(50 * time.Millisecond) // poll interval while async publishes are still arriving
	}
}

// sentinelBody starts the body of every sentinel; mqtarget's payloads start with a hex id instead.
const sentinelBody = "sentinel "

const sentinelHeader = "mqtarget-itest-sentinel"

// sendSentinel sends sentinel (the body, also in a header) to dest on a connection of its own and
// returns once the broker acknowledged it.
func (h *STOMP) sendSentinel(t testing.TB, host int, dest, sentinel string, end time.Time) {
	t.Helper()
	pub := h.dial(t, host, end)
	f := frame.New(frame.SEND, frame.Destination, dest, sentinelHeader, sentinel, frame.Receipt, "sentinel")
	if h.Persistent {
		f.Header.Add("persistent", "true")
	}
	f.Body = []byte(sentinel)
	pub.write(t, f)
	if r := pub.read(t); r == nil || r.Command != frame.RECEIPT {
		t.Fatalf("sentinel to %s on %s: %v", dest, h.Addrs[host], r)
	}
	pub.disconnect(t)
}

// stompClient is a bare STOMP connection for the harness.
type stompClient struct {
	addr string
	conn net.Conn
	r    *frame.Reader
	w    *frame.Writer
}

func (h *STOMP) dial(t testing.TB, host int, end time.Time) *stompClient {
	t.Helper()
	addr := h.Addrs[host]
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("stomp dial %s: %v", addr, err)
	}
	_ = conn.SetDeadline(end)
	if h.TLS.Enabled {
		tc, err := h.TLS.Client("stomp")
		if err != nil {
			t.Fatal(err)
		}
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn = tls.Client(conn, tc)
	}
	c := &stompClient{addr: addr, conn: conn, r: frame.NewReader(conn), w: frame.NewWriter(conn)}
	vhost := h.VHost
	if vhost == "" {
		vhost = "127.0.0.1"
	}
	f := frame.New(frame.CONNECT, frame.AcceptVersion, "1.2", frame.Host, vhost, frame.HeartBeat, "0,0")
	if h.Login != "" {
		f.Header.Add(frame.Login, h.Login)
		f.Header.Add(frame.Passcode, h.Passcode)
	}
	c.write(t, f)
	if r := c.read(t); r == nil || r.Command != frame.CONNECTED {
		conn.Close()
		t.Fatalf("stomp connect %s: %v", addr, r)
	}
	return c
}

func (c *stompClient) write(t testing.TB, f *frame.Frame) {
	t.Helper()
	if err := c.w.Write(f); err != nil {
		t.Fatalf("stomp %s: writing %s: %v", c.addr, f.Command, err)
	}
}

// read returns the next frame, skipping heart-beats; nil when the deadline passed.
func (c *stompClient) read(t testing.TB) *frame.Frame {
	t.Helper()
	for {
		f, err := c.r.Read()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		if err != nil {
			t.Fatalf("stomp %s: read: %v", c.addr, err)
		}
		if f != nil {
			return f
		}
	}
}

// disconnect sends DISCONNECT and waits for its receipt: then the broker has processed every frame before.
func (c *stompClient) disconnect(t testing.TB) {
	t.Helper()
	c.write(t, frame.New(frame.DISCONNECT, frame.Receipt, "bye"))
	for {
		f := c.read(t)
		if f == nil {
			t.Fatalf("stomp %s: no DISCONNECT receipt", c.addr)
		}
		if f.Command == frame.RECEIPT {
			break
		}
	}
	c.close()
}

func (c *stompClient) close() { _ = c.conn.Close() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ScriptBroker controls a broker run by one of scripts/*.sh: stop and start through the script, freeze
// and thaw by signalling the PID in the script's pid file.
type ScriptBroker struct {
	Script  string // path to scripts/NAME.sh
	PIDFile string
	Env     []string // added to the script's environment, so a restart keeps the port and login
}

func (b ScriptBroker) run(t testing.TB, cmd string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", b.Script, cmd)
	c.Env = append(os.Environ(), b.Env...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", b.Script, cmd, err, out)
	}
}

func (b ScriptBroker) Stop(t testing.TB)  { t.Helper(); b.run(t, "stop", 60*time.Second) }
func (b ScriptBroker) Start(t testing.TB) { t.Helper(); b.run(t, "start", 150*time.Second) }
func (b ScriptBroker) Freeze(t testing.TB) {
	t.Helper()
	publishertest.Freeze(t, b.pid(t))
}
func (b ScriptBroker) Thaw(t testing.TB) {
	t.Helper()
	must(t, syscall.Kill(b.pid(t), syscall.SIGCONT))
}

func (b ScriptBroker) pid(t testing.TB) int {
	t.Helper()
	raw, err := os.ReadFile(b.PIDFile)
	if err != nil {
		t.Fatalf("broker pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		t.Fatalf("broker pid file %s: %q", b.PIDFile, raw)
	}
	return pid
}

// Kill sends SIGKILL to the broker (a crash) and returns once the process is gone; Start restarts it.
func (b ScriptBroker) Kill(t testing.TB) {
	t.Helper()
	pid := b.pid(t)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	testwait.Until(t, 10*time.Second, fmt.Sprintf("process %d gone after SIGKILL", pid), func() error { return gone(pid) })
}

// KillHost kills host i's broker with SIGKILL; its control must be a ScriptBroker (or have Kill).
func (h *STOMP) KillHost(t testing.TB, i int) {
	t.Helper()
	k, ok := h.Ctl[i].(interface{ Kill(testing.TB) })
	if !ok {
		t.Fatalf("host %d's broker control %T cannot kill", i, h.Ctl[i])
	}
	k.Kill(t)
}

// ConsumeAll drains topic on host: everything queued before a sentinel, at least atLeast messages.
func (h *STOMP) ConsumeAll(t testing.TB, host int, topic string, atLeast int) [][]byte {
	t.Helper()
	return h.Consume(t, host, topic, atLeast, 20*time.Second)
}

// RealBroker reads a broker's address, login and pid file from the MQTARGET_<NAME>_* variables
// scripts/test.sh exports, and controls it with scripts/<name>.sh.
func RealBroker(t testing.TB, name, env string) (addr, login, passcode string, ctl ScriptBroker) {
	t.Helper()
	hint := "scripts/test.sh starts " + name + " and sets it"
	addr = SetEnv(t, "MQTARGET_"+env+"_STOMP", hint)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("MQTARGET_%s_STOMP: %v", env, err)
	}
	login, passcode = os.Getenv("MQTARGET_"+env+"_LOGIN"), os.Getenv("MQTARGET_"+env+"_PASSCODE")
	ctl = ScriptBroker{Script: scriptPath(name), PIDFile: SetEnv(t, "MQTARGET_"+env+"_PIDFILE", hint),
		Env: []string{env + "_STOMP_PORT=" + port, env + "_LOGIN=" + login, env + "_PASSCODE=" + passcode}}
	return addr, login, passcode, ctl
}
