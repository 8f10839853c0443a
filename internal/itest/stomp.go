package itest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	"github.com/mqtarget/mqtarget/publishers"
)

// STOMP is the Harness for a set of STOMP brokers sharing one login: embedded go-stomp servers, ActiveMQ
// Artemis, ActiveMQ Classic, RabbitMQ, or a mix. Every host must be a distinct broker, so that what a
// consumer finds on host i's queue landed there through host i.
type STOMP struct {
	Addrs      []string
	Login      string
	Passcode   string
	Persistent bool            // configure mqtarget with stomp.persistent
	VHost      string          // CONNECT host header (stomp.vhost; RabbitMQ: "/"); empty: 127.0.0.1
	Ctl        []BrokerControl // per host; nil (or a nil entry) when the broker cannot be stopped

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

// Consume drains the queue topic on host: it subscribes, then sends a sentinel message to the same queue
// on a connection of its own and collects messages until the sentinel arrives. Queues are FIFO for a
// single consumer, so everything queued before the sentinel (every acknowledged message) has then been
// seen, and duplicates or extras are returned too rather than missed. While fewer than want messages
// came (async publishes may still be on their way), it sends another sentinel and goes on, until the
// deadline; a deadline passing with no sentinel back fails the test.
//
// It speaks STOMP with go-stomp's frame package rather than go-stomp's client: it must UNSUBSCRIBE before
// DISCONNECT, and the go-stomp v3.1.3 server never answers an UNSUBSCRIBE receipt (the client would
// wait for one). Without the UNSUBSCRIBE, the server may dispatch a message sent just after the
// consumer left to the closing connection, where it is lost; ack:client panics that server.
func (h *STOMP) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	dest := stompPrefix + topic
	end := time.Now().Add(deadline)
	sub := h.dial(t, host, end)
	defer sub.close()
	sub.write(t, frame.New(frame.SUBSCRIBE, frame.Id, "0", frame.Destination, dest, frame.Ack, "auto"))

	sentinel := h.sendSentinel(t, host, dest, end)

	var got [][]byte
	for {
		m := sub.read(t)
		if m == nil {
			t.Errorf("draining %s on %s: sentinel not back within %v (%d messages so far)", dest, h.Addrs[host], deadline, len(got))
			return got
		}
		if m.Command != frame.MESSAGE {
			t.Fatalf("consuming %s on %s: %s %s", dest, h.Addrs[host], m.Command, m.Header.Get(frame.Message))
		}
		switch m.Header.Get(sentinelHeader) {
		case sentinel:
			if len(got) < want && time.Now().Add(100*time.Millisecond).Before(end) {
				time.Sleep(50 * time.Millisecond) // poll interval while async publishes are still arriving
				sentinel = h.sendSentinel(t, host, dest, end)
				continue
			}
			sub.write(t, frame.New(frame.UNSUBSCRIBE, frame.Id, "0"))
			sub.disconnect(t)
			h.mu.Lock()
			if h.consumed == nil {
				h.consumed = map[key]int{}
			}
			h.consumed[key{host, topic}] += len(got)
			h.mu.Unlock()
			return got
		case "":
			got = append(got, m.Body)
		}
	}
}

const sentinelHeader = "mqtarget-itest-sentinel"

// sendSentinel sends a sentinel to dest on a connection of its own and returns its id once the broker
// acknowledged it.
func (h *STOMP) sendSentinel(t testing.TB, host int, dest string, end time.Time) string {
	t.Helper()
	sentinel := randomHex(8)
	pub := h.dial(t, host, end)
	f := frame.New(frame.SEND, frame.Destination, dest, sentinelHeader, sentinel, frame.Receipt, "sentinel")
	if h.Persistent {
		f.Header.Add("persistent", "true")
	}
	f.Body = []byte("sentinel")
	pub.write(t, f)
	if r := pub.read(t); r == nil || r.Command != frame.RECEIPT {
		t.Fatalf("sentinel to %s on %s: %v", dest, h.Addrs[host], r)
	}
	pub.disconnect(t)
	return sentinel
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
	must(t, syscall.Kill(b.pid(t), syscall.SIGSTOP))
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
