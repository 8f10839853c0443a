package amqp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/mqtarget/mqtarget/internal/rabbitmqctl"
	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// The integration tests run against a real RabbitMQ started by scripts/rabbitmq.sh:
//
//	MQTARGET_AMQP_TEST_URLS=amqp://mqtarget:mqtarget@127.0.0.1:5673/ go test ./publishers/amqp/
//
// with the script's RABBITMQ_* variables of that node in the environment: they count what the broker
// holds with its own tool (scripts/rabbitmq.sh ctl list_queues). Each URL's vhost is made here when
// missing, so URLs naming vhosts of one node stand for independent servers.

func integrationURLs(t *testing.T) []string {
	s := os.Getenv("MQTARGET_AMQP_TEST_URLS")
	if s == "" {
		t.Skip("MQTARGET_AMQP_TEST_URLS is not set (a RabbitMQ started by scripts/rabbitmq.sh: see docs/amqp.md)")
	}
	urls := strings.Split(s, ",")
	for _, u := range urls {
		srv, err := parse(u)
		if err != nil {
			t.Fatalf("MQTARGET_AMQP_TEST_URLS: %v", err)
		}
		if srv.vhost != "/" {
			ctl(t, "add_vhost", srv.vhost) // an error when it exists: fine
			ctl(t, "set_permissions", "-p", srv.vhost, srv.user, ".*", ".*", ".*")
		}
	}
	return urls
}

// ctl runs rabbitmqctl ARGS against the node (scripts/rabbitmq.sh with the RABBITMQ_* variables of
// the environment) and returns its output.
func ctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := rabbitmqctl.Node{}.Run(args...)
	if err != nil && args[0] != "add_vhost" {
		t.Fatal(err)
	}
	return out
}

// queueMessages is how many messages queue holds in vhost, as rabbitmqctl list_queues says; -1: no
// such queue.
func queueMessages(t *testing.T, vhost, queue string) int {
	t.Helper()
	n, err := rabbitmqctl.Node{}.Messages(vhost, queue)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func freshName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// TestIntegrationLedger: what Publish, PublishBatch and PublishAsync acknowledge to host k is exactly
// what host k's queue holds, counted by rabbitmqctl, and no other host got any of it.
func TestIntegrationLedger(t *testing.T) {
	testlane.Lock(t, "rabbitmq") // the real brokers other packages stop and freeze too
	urls := integrationURLs(t)
	p, _ := newTestPublisher(t, urls, nil)
	topic := freshName("ledger")
	acked := make([]int, len(urls))
	for k := range urls {
		for range 5 + k {
			if err := p.Publish(ctxT(t, 5*time.Second), k, topic, []byte("sync")); err != nil {
				t.Fatalf("host %d: Publish: %v", k, err)
			}
			acked[k]++
		}
		for range 3 {
			if err := p.PublishBatch(ctxT(t, 5*time.Second), k, topic, [][]byte{[]byte("b1"), []byte("b2")}); err != nil {
				t.Fatalf("host %d: PublishBatch: %v", k, err)
			}
			acked[k] += 2
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 20 {
			wg.Add(1)
			if err := p.PublishAsync(k, topic, []byte("async"), func(err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("host %d: async: %v", k, err)
					return
				}
				mu.Lock()
				acked[k]++
				mu.Unlock()
			}); err != nil {
				wg.Done()
				t.Fatalf("host %d: PublishAsync: %v", k, err)
			}
		}
		wg.Wait()
	}
	for k, u := range urls {
		srv, _ := parse(u)
		if got := queueMessages(t, srv.vhost, topic); got != acked[k] {
			t.Errorf("host %d (%s): rabbitmqctl counts %d messages in %s, %d were acknowledged", k, p.Hosts()[k], got, topic, acked[k])
		} else {
			t.Logf("host %d (%s): %d acknowledged, %d held (rabbitmqctl list_queues)", k, p.Hosts()[k], acked[k], got)
		}
	}
	if v := p.BrokerVersion(0); !strings.HasPrefix(v, "RabbitMQ ") {
		t.Errorf("BrokerVersion = %q", v)
	}
	// The consumer reads back exactly that, then the queue is empty.
	c := DefaultConfig()
	c.URLs = urls
	cons, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := make([]int, len(urls))
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	total := 0
	for _, n := range acked {
		total += n
	}
	seen := 0
	err = cons.Consume(ctx, topic, func(d publishers.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		got[d.Host]++
		if seen++; seen == total {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range urls {
		if got[k] != acked[k] {
			t.Errorf("host %d: consumed %d, %d acknowledged", k, got[k], acked[k])
		}
	}
}

// TestIntegrationRefusals: what RabbitMQ refuses answers ErrRejected and publishing goes on: a message
// no queue takes (mandatory, its queue deleted behind mqtarget's back), a queue declared with the
// other durability, a reserved name, a full queue (max-length with overflow reject-publish: its
// basic.nack; the queue holds what was acknowledged).
func TestIntegrationRefusals(t *testing.T) {
	testlane.Lock(t, "rabbitmq") // the real brokers other packages stop and freeze too
	urls := integrationURLs(t)
	p, _ := newTestPublisher(t, urls[:1], nil)
	srv, _ := parse(urls[0])
	topic := freshName("unroutable")
	if err := p.Publish(ctxT(t, 5*time.Second), 0, topic, []byte("x")); err != nil {
		t.Fatal(err)
	}
	ctl(t, "delete_queue", "-p", srv.vhost, topic)
	if err := p.Publish(ctxT(t, 5*time.Second), 0, topic, []byte("x")); !errors.Is(err, publishers.ErrRejected) {
		t.Fatalf("publish to a deleted queue: %v, want ErrRejected (returned)", err)
	} else {
		t.Logf("unroutable: %v", err)
	}
	q := freshName("durable")
	if err := p.Publish(ctxT(t, 5*time.Second), 0, q, []byte("x")); err != nil {
		t.Fatal(err)
	}
	tp, _ := newTestPublisher(t, urls[:1], func(c *Config) { c.Durable = false })
	if err := tp.Publish(ctxT(t, 5*time.Second), 0, q, []byte("x")); !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "406") {
		t.Fatalf("transient publish to a durable queue: %v, want 406 rejected", err)
	}
	if err := tp.Publish(ctxT(t, 5*time.Second), 0, freshName("transient"), []byte("x")); err != nil {
		t.Fatalf("after a refused declaration: %v", err)
	}
	if err := p.Publish(ctxT(t, 5*time.Second), 0, "amq.reserved", []byte("x")); !errors.Is(err, publishers.ErrRejected) {
		t.Fatalf("reserved name: %v", err)
	}
	if got := queueMessages(t, srv.vhost, q); got != 1 {
		t.Fatalf("%s holds %d, want 1", q, got)
	}

	full := freshName("mqt-full")
	ctl(t, "set_policy", "-p", srv.vhost, "--apply-to", "queues", full, "^"+full+"$", `{"max-length":2,"overflow":"reject-publish"}`)
	defer ctl(t, "clear_policy", "-p", srv.vhost, full)
	acked := 0
	for i := range 4 {
		err := p.Publish(ctxT(t, 5*time.Second), 0, full, []byte("x"))
		switch {
		case err == nil:
			acked++
		case !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "basic.nack"):
			t.Fatalf("publish %d to a full queue: %v, want rejected naming basic.nack", i, err)
		}
	}
	if err := p.PublishBatch(ctxT(t, 5*time.Second), 0, full, [][]byte{[]byte("b1"), []byte("b2")}); !errors.Is(err, publishers.ErrRejected) {
		t.Fatalf("batch to a full queue: %v, want rejected", err)
	}
	if got := queueMessages(t, srv.vhost, full); acked != 2 || got != acked {
		t.Fatalf("full queue: %d acknowledged, %d held; want 2 and 2", acked, got)
	}
}

// TestIntegrationConformance runs the shared suite (the broker side counted with this package's
// consumer).
func TestIntegrationConformance(t *testing.T) {
	testlane.Lock(t, "rabbitmq") // the real brokers other packages stop and freeze too
	urls := integrationURLs(t)
	f := publishertest.Features{
		Rejections: []publishertest.Rejection{
			{Name: "reserved queue name", Topic: "amq.mqtarget"},
		},
		AsyncTimeout: defaultMaxWait + 2*stallTick,
	}
	r := rabbit{urls: urls}
	if data := os.Getenv("RABBITMQ_DATA"); data != "" {
		r.pidFile = data + "/mqtarget-broker.pid" // scripts/lib/stomp-broker.sh's
	} else {
		f.NoFreeze = "RABBITMQ_DATA is not set: the node's PID file is unknown"
	}
	f.BadLogin = func(t testing.TB) (publishers.Publisher, error) {
		u, err := url.Parse(urls[0])
		if err != nil {
			t.Fatal(err)
		}
		pass, _ := u.User.Password()
		u.User = url.UserPassword(u.User.Username(), pass+"-wrong")
		c := DefaultConfig()
		c.URLs = []string{u.String()}
		return New(c, publishertest.Logger(t))
	}
	publishertest.Run(t, f, r, func(t testing.TB) publishers.Publisher {
		c := DefaultConfig()
		c.URLs = urls
		p, err := New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// rabbit is publishertest.Broker over a RabbitMQ: Consume drains host's queue; FreezeHost stops the
// node (SIGSTOP: every URL of it, as they are vhosts of one node).
type rabbit struct {
	urls    []string
	pidFile string
}

func (r rabbit) pid(t testing.TB) int {
	b, err := os.ReadFile(r.pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func (r rabbit) signal(t testing.TB, sig syscall.Signal) {
	if err := syscall.Kill(r.pid(t), sig); err != nil {
		t.Fatal(err)
	}
}

func (r rabbit) FreezeHost(t testing.TB, _ int) { publishertest.Freeze(t, r.pid(t)) }
func (r rabbit) ThawHost(t testing.TB, _ int)   { r.signal(t, syscall.SIGCONT) }

func (r rabbit) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	c := DefaultConfig()
	c.URLs = r.urls[host : host+1]
	cons, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var mu sync.Mutex
	var got [][]byte
	var extra *time.Timer
	if want == 0 { // nothing is awaited: whatever the queue holds arrives soon after the subscription
		extra = time.AfterFunc(3*time.Second, cancel)
	}
	err = cons.Consume(ctx, topic, func(d publishers.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d.Body)
		if len(got) == want && extra == nil {
			extra = time.AfterFunc(500*time.Millisecond, cancel) // any more would come within this
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if extra != nil {
		extra.Stop()
	}
	return got
}

// TestIntegrationKill (MQTARGET_AMQP_KILL=1, it restarts the node): the node is killed with -9 under
// load. Every publish acknowledged before is still held after the restart (persistent messages in a
// durable queue: the ack came after the write to disk); what failed may or may not be held; the
// publisher recovers without a restart of its own, and resends nothing.
func TestIntegrationKill(t *testing.T) {
	testlane.Lock(t, "rabbitmq") // the real brokers other packages stop and freeze too
	if os.Getenv("MQTARGET_AMQP_KILL") == "" || os.Getenv("RABBITMQ_DATA") == "" {
		t.Skip("MQTARGET_AMQP_KILL and RABBITMQ_DATA are not set (this test kills and restarts the node)")
	}
	urls := integrationURLs(t)
	r := rabbit{urls: urls, pidFile: os.Getenv("RABBITMQ_DATA") + "/mqtarget-broker.pid"}
	p, _ := newTestPublisher(t, urls[:1], nil)
	// A round in which the node lost the durable queue itself (see docs/amqp.md, "Open") says nothing
	// about what the publisher acknowledged: it is run again with a new queue, up to rounds times.
	const rounds = 3
	for round := 1; ; round++ {
		if !killRound(t, r, p) {
			return
		}
		if round == rounds {
			t.Fatalf("in all %d rounds the node lost the durable queue itself", rounds)
		}
	}
}

// killRound publishes from 8 goroutines to a new queue, kills the node with -9 once more than 200
// publishes were confirmed, restarts it and checks that the queue holds every confirmed message and
// no more than were sent. It returns true when the queue itself was gone after the restart, having
// logged why that is not the publisher's doing (the queue was durable before the kill) and what the
// node's files and log said.
func killRound(t *testing.T, r rabbit, p *Publisher) (queueLost bool) {
	t.Helper()
	srv, _ := parse(r.urls[0])
	topic := freshName("kill")
	var mu sync.Mutex
	var acked, failed int
	var firstAck time.Time
	stop := publishertest.Loop(8, func() {
		err := p.Publish(ctxT(t, time.Second), 0, topic, []byte("k"))
		mu.Lock()
		if err == nil {
			if acked == 0 {
				firstAck = time.Now()
			}
			acked++
		} else if !errors.Is(err, publishers.ErrUnavailable) && !errors.Is(err, publishers.ErrTimeout) {
			t.Errorf("publish during the kill: %v", err)
		} else {
			failed++
		}
		mu.Unlock()
		if err != nil {
			time.Sleep(10 * time.Millisecond) // no busy loop while the node is down
		}
	})
	defer stop() // a failure below leaves no publisher running; stopping again is a no-op
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return acked > 200 })
	durable := isDurable(t, r.urls[0], topic) // over AMQP, in milliseconds: the kill is not delayed
	mu.Lock()
	age := time.Since(firstAck)
	mu.Unlock()
	r.signal(t, syscall.SIGKILL)
	time.Sleep(500 * time.Millisecond) // publishes meet the dead node
	stop()
	mu.Lock()
	a, f := acked, failed
	mu.Unlock()
	onDisk := filesNaming(t, os.Getenv("RABBITMQ_DATA")+"/mnesia", topic)
	out, err := exec.Command("../../scripts/rabbitmq.sh", "start").CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	existed := queueMessages(t, srv.vhost, topic) >= 0 // before the publisher's redeclare below
	start := time.Now()
	for {
		err := p.Publish(ctxT(t, time.Second), 0, topic, []byte("after"))
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no recovery within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	held := queueMessages(t, srv.vhost, topic)
	t.Logf("acknowledged %d before the kill (the first %v before it), %d failed; the queue holds %d (+1 published after the restart); recovered %v after the restart",
		a, age.Round(time.Millisecond), f, held, time.Since(start).Round(time.Millisecond))
	if held >= a+1 && held <= a+f+1 {
		return false
	}
	t.Logf("the queue existed after the restart, before the publisher declared it again: %v", existed)
	t.Logf("files of the node's database naming the queue after the kill, before the restart: %q", onDisk)
	t.Logf("scripts/rabbitmq.sh start said:\n%s", out)
	t.Logf("the node's log on its recovery:\n%s", publishertest.LogLines(os.Getenv("RABBITMQ_DATA")+"/log/mqtarget-run.log", 40, recoveryWords...))
	if !existed && durable {
		t.Logf("the node confirmed %d messages into a durable queue and lost the queue in the kill: not the publisher's doing", a)
		return true
	}
	t.Fatalf("held %d, want %d..%d: acknowledged messages lost, or some sent twice (the queue durable before the kill: %v)", held, a+1, a+f+1, durable)
	return false
}

// isDurable reports whether queue exists as a durable queue on the server of url: declaring it
// non-durable then fails with 406 PRECONDITION_FAILED (inequivalent arg 'durable').
func isDurable(t *testing.T, url, queue string) bool {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDeclare(queue, false, false, false, false, nil)
	var e *amqp091.Error
	return errors.As(err, &e) && e.Code == amqp091.PreconditionFailed
}

// filesNaming lists the files under dir, message stores left out, whose bytes contain name: where the
// node's database recorded the queue (mnesia's LATEST.LOG, rabbit_durable_queue.DCL/DCD).
func filesNaming(t *testing.T, dir, name string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "msg_stores" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte(name)) {
				found = append(found, strings.TrimPrefix(path, dir+"/"))
			}
		}
		return nil
	})
	if err != nil {
		t.Logf("reading %s: %v", dir, err)
	}
	return found
}

// recoveryWords pick the lines of the node's log that tell what its recovery after an unclean shutdown
// did ("Queue X in vhost / dropped 0/12/0 persistent messages ... after unclean shutdown").
var recoveryWords = []string{"unclean", "dropped", "recover", "rebuilding", "database"}
