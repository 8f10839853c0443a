package nats_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestIntegrationLedger runs against real nats-servers (scripts/nats.sh start, one per address):
// MQTARGET_NATS_TEST_SERVERS lists their client addresses and MQTARGET_NATS_MONITORS their monitor
// addresses, in the same order. What Publish, PublishBatch and PublishAsync acknowledged to host k must
// be what server k's /jsz reports for the topic's stream, and nothing of it on the other servers.
func TestIntegrationLedger(t *testing.T) {
	testlane.Lock(t, "nats") // the real brokers other packages stop and freeze too
	servers, monitors := os.Getenv("MQTARGET_NATS_TEST_SERVERS"), os.Getenv("MQTARGET_NATS_MONITORS")
	if servers == "" || monitors == "" {
		t.Skip("MQTARGET_NATS_TEST_SERVERS and MQTARGET_NATS_MONITORS are not set (scripts/nats.sh start; see docs/nats.md)")
	}
	addrs, mons := strings.Split(servers, ","), strings.Split(monitors, ",")
	if len(addrs) != len(mons) {
		t.Fatalf("%d servers, %d monitors", len(addrs), len(mons))
	}
	p := open(t, addrs, nil)
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := "itest.ledger." + hex.EncodeToString(b[:])
	stream := nats.StreamName(topic)
	acked := make([]int, len(addrs))
	for host := range addrs {
		// a different number on each host, so a message on the wrong server shows in the counts
		for i := range 5 + host {
			if err := p.Publish(ctx(t), host, topic, fmt.Appendf(nil, "sync %d %d", host, i)); err != nil {
				t.Fatalf("host %d: Publish: %v", host, err)
			}
			acked[host]++
		}
		for range 3 {
			if err := p.PublishBatch(ctx(t), host, topic, [][]byte{[]byte("b1"), []byte("b2")}); err != nil {
				t.Fatalf("host %d: PublishBatch: %v", host, err)
			}
			acked[host] += 2
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 50 {
			wg.Add(1)
			if err := p.PublishAsync(host, topic, fmt.Appendf(nil, "async %d", i), func(err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("host %d: PublishAsync's done: %v", host, err)
					return
				}
				mu.Lock()
				acked[host]++
				mu.Unlock()
			}); err != nil {
				t.Fatalf("host %d: PublishAsync: %v", host, err)
			}
		}
		wg.Wait()
	}
	for k, mon := range mons {
		got := jszMessages(t, mon, stream)
		if got != acked[k] {
			t.Errorf("server %d (%s): /jsz reports %d messages in stream %s, %d were acknowledged to host %d", k, addrs[k], got, stream, acked[k], k)
		}
		t.Logf("server %d: %d acknowledged, /jsz reports %d", k, acked[k], got)
	}
}

// jszMessages is the message count of stream as the monitor at mon reports it (/jsz?streams=true); 0
// when the server has no such stream.
func jszMessages(t testing.TB, mon, stream string) int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no idle connection outlives the test
	n, err := nats.StreamMessages(t.Context(), client, mon, stream)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pidBroker is jsBroker for real servers, frozen with SIGSTOP of their processes.
type pidBroker struct {
	jsBroker
	pids []int
}

// FreezeHost returns once every thread of the server has stopped (publishertest.Freeze).
func (b pidBroker) FreezeHost(t testing.TB, host int) { publishertest.Freeze(t, b.pids[host]) }
func (b pidBroker) ThawHost(t testing.TB, host int)   { signal(t, b.pids[host], syscall.SIGCONT) }

func signal(t testing.TB, pid int, sig syscall.Signal) {
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationConformance runs the conformance suite against real nats-servers
// (MQTARGET_NATS_TEST_SERVERS), frozen by SIGSTOP of the PIDs in MQTARGET_NATS_PIDFILES (scripts/nats.sh's
// $NATS_DATA/mqtarget-broker.pid, in the same order).
func TestIntegrationConformance(t *testing.T) {
	testlane.Lock(t, "nats") // the real brokers other packages stop and freeze too
	servers, pidfiles := os.Getenv("MQTARGET_NATS_TEST_SERVERS"), os.Getenv("MQTARGET_NATS_PIDFILES")
	if servers == "" || pidfiles == "" {
		t.Skip("MQTARGET_NATS_TEST_SERVERS and MQTARGET_NATS_PIDFILES are not set (see docs/nats.md)")
	}
	b := pidBroker{jsBroker: jsBroker{addrs: strings.Split(servers, ",")}}
	for _, f := range strings.Split(pidfiles, ",") {
		b.pids = append(b.pids, readPID(t, f))
	}
	if len(b.pids) != len(b.addrs) {
		t.Fatalf("%d servers, %d PID files", len(b.addrs), len(b.pids))
	}
	small := "rejected.small." + strconv.Itoa(os.Getpid()) // a stream of its own, made here, taking 16 bytes
	makeStream(t, b.addrs[0], jetstream.StreamConfig{Name: nats.StreamName(small), Subjects: []string{small}, MaxMsgSize: 16})
	f := publishertest.Features{
		AsyncTimeout: nats.AsyncMaxWait,
		NoLogin:      "scripts/nats.sh starts the servers without authorization (TestLogin refuses one on a server of its own)",
		Rejections: []publishertest.Rejection{
			{Name: "over max_payload", Topic: "rejected.big", Body: make([]byte, 2<<20), Kind: publishers.ErrTooLarge},
			{Name: "over the stream's max_msg_size", Topic: small, Body: make([]byte, 100)},
		},
	}
	publishertest.Run(t, f, b, func(t testing.TB) publishers.Publisher {
		c := nats.DefaultConfig()
		c.Servers = b.addrs
		p, err := nats.New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// readPID reads the PID scripts/nats.sh left in pidfile.
func readPID(t testing.TB, pidfile string) int {
	t.Helper()
	raw, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
