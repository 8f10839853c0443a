package publishers_test

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/embedded"
	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// The conformance suite against every publisher with a real broker. The brokers come from the same
// MQTARGET_* variables scripts/test.sh exports for internal/itest: without MQTARGET_INTEGRATION the
// tests skip, with it a missing variable fails them.

// TestConformanceNSQ runs the suite against two real nsqd processes, started here.
func TestConformanceNSQ(t *testing.T) {
	bin := integrationEnv(t, "MQTARGET_NSQD_BIN", "scripts/test.sh builds nsqd and sets it")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MQTARGET_NSQD_BIN: %v", err)
	}
	const maxMsgSize = 1024
	h := &itest.NSQ{}
	for range 2 {
		p := itest.StartNSQDProc(t, bin, "-max-msg-size", "1024")
		h.TCP = append(h.TCP, p.TCPAddr)
		h.HTTP = append(h.HTTP, p.HTTPAddr)
		h.Procs = append(h.Procs, p)
	}
	f := publishertest.Features{
		// nsqWriteTimeout (5 s) is the deadline of a publish without one; a command unanswered a second
		// (nsqStallGrace) past its deadline marks the connection stalled.
		AsyncTimeout: 6 * time.Second,
		Rejections: []publishertest.Rejection{
			{Name: "invalid topic", Topic: "bad!topic", Body: []byte("refused")},
			{Name: "over max-msg-size", Topic: "conformance_oversize", Body: bytes.Repeat([]byte("x"), maxMsgSize+1)},
		},
	}
	publishertest.Run(t, f, nsqBroker{h}, func(t testing.TB) publishers.Publisher {
		c := publishers.DefaultNSQConfig()
		c.Hosts = h.TCP
		p, err := publishers.NewNSQ(c, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// nsqBroker consumes what nsqd says the topic took: the harness's consumer returns as soon as it has
// the number asked for, which would hide extras and duplicates arriving after it.
type nsqBroker struct{ *itest.NSQ }

func (b nsqBroker) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	stored := b.Stored(t, host, topic)
	// Stored's keep-alive connection would otherwise outlive the publisher's Close in the leak check.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	return b.NSQ.Consume(t, host, topic, max(want, stored), deadline)
}

// TestConformanceArtemis runs the suite against the Artemis that scripts/test.sh started.
func TestConformanceArtemis(t *testing.T) {
	addr := integrationEnv(t, "MQTARGET_ARTEMIS_STOMP", "scripts/test.sh starts Artemis and sets it")
	login := integrationEnv(t, "MQTARGET_ARTEMIS_LOGIN", "the STOMP login scripts/test.sh gave Artemis")
	pass := integrationEnv(t, "MQTARGET_ARTEMIS_PASSCODE", "the STOMP passcode scripts/test.sh gave Artemis")
	pidfile := integrationEnv(t, "MQTARGET_ARTEMIS_PIDFILE", "the pid file of the Artemis scripts/test.sh started")
	script, err := filepath.Abs(filepath.Join("..", "scripts", "artemis.sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("MQTARGET_ARTEMIS_STOMP: %v", err)
	}
	ctl := itest.ScriptBroker{Script: script, PIDFile: pidfile,
		Env: []string{"ARTEMIS_STOMP_PORT=" + port, "ARTEMIS_LOGIN=" + login, "ARTEMIS_PASSCODE=" + pass}}
	h := &itest.STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Persistent: true, Ctl: []itest.BrokerControl{ctl}}
	f := publishertest.Features{
		// stompReceiptTimeout: a connection whose oldest receipt is 30 s late is failed.
		AsyncTimeout: 30 * time.Second,
		Rejections: []publishertest.Rejection{
			// Artemis answers ERROR AMQ229216 "Invalid queue name" to both.
			{Name: "empty destination name", Topic: "", Body: []byte("refused")},
			{Name: "fully qualified name without queue", Topic: "conformance::", Body: []byte("refused")},
		},
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		return newSTOMP(t, h)
	})
}

// TestConformanceEmbeddedSTOMP runs the suite against the embedded go-stomp servers (no integration
// environment needed: they run in the test process).
func TestConformanceEmbeddedSTOMP(t *testing.T) {
	srv, err := embedded.StartSTOMP(2, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h := &itest.STOMP{Addrs: srv.Addrs()}
	f := publishertest.Features{
		NoFreeze: "the go-stomp server runs in the test process, a SIGSTOP would stop the test too " +
			"(the suite's own test stalls it through a proxy)",
		NoReject: "go-stomp v3.1.3 accepts every SEND; it answers ERROR only to protocol and transaction misuse, " +
			"which the Publisher interface cannot produce",
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		return newSTOMP(t, h)
	})
}

func newSTOMP(t testing.TB, h *itest.STOMP) publishers.Publisher {
	c := publishers.DefaultSTOMPConfig()
	c.Hosts = h.Addrs
	c.Login = h.Login
	c.Passcode = publishers.Secret(h.Passcode)
	c.Persistent = h.Persistent
	p, err := publishers.NewSTOMP(c, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConformanceRocketMQ runs the suite against the RocketMQ cluster scripts/test.sh started (name server,
// broker-a, broker-b); broker-a is frozen through scripts/rocketmq.sh pid, as internal/itest does.
func TestConformanceRocketMQ(t *testing.T) {
	ns := integrationEnv(t, "MQTARGET_ROCKETMQ_NAMESRV", "scripts/test.sh starts RocketMQ with scripts/rocketmq.sh and sets it")
	h := itest.NewRocketMQ(t, ns)
	const sendTimeout = 2 * time.Second
	f := publishertest.Features{
		AsyncTimeout: sendTimeout, // rocketmq.send_timeout bounds every send, retries included
		Rejections: []publishertest.Rejection{
			// The broker's maxMessageSize is 4 MiB; the client does not check it (and compression is off).
			{Name: "over maxMessageSize", Topic: "conformance_oversize", Body: bytes.Repeat([]byte("x"), 4<<20+1)},
		},
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		c := publishers.DefaultRocketMQConfig()
		c.NameServers = []string{ns}
		c.SendTimeout = sendTimeout
		c.CreateTopics = true // the suite's fresh topics then exist on every broker
		c.Queues = 4
		p, err := publishers.NewRocketMQ(c, nil, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// integrationEnv returns the variable name; it skips the test without MQTARGET_INTEGRATION and fails it
// when the variable is missing with it.
func integrationEnv(t *testing.T, name, why string) string {
	t.Helper()
	itest.Integration(t)
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set (%s)", name, why)
	}
	return v
}

// testLogger logs at warn and above to the test's log, and drops what comes after the test ended (a
// broker client may log from its own goroutines; the suite's leak check reports those).
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
