package kafka_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/kafka"
	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// The integration tests run against a real cluster, e.g. the one scripts/kafka.sh starts:
//
//	KAFKA_PORT=23092 KAFKA_CONTROLLER_PORT=23094 scripts/kafka.sh start
//	MQTARGET_KAFKA_TEST_BROKERS=127.0.0.1:23092 go test ./publishers/kafka/
//
// With KAFKA_SCRIPT (the path of scripts/kafka.sh, with the KAFKA_* settings of that start in
// the environment) the ledger is also counted with Kafka's own GetOffsetShell, and the conformance
// suite freezes brokers (SIGSTOP of the PID the script names).
func integrationConfig(t testing.TB) kafka.Config {
	t.Helper()
	return configFrom(t, "MQTARGET_KAFKA_TEST_BROKERS")
}

func configFrom(t testing.TB, env string) kafka.Config {
	t.Helper()
	brokers := os.Getenv(env)
	if brokers == "" {
		t.Skip(env + " is not set (a Kafka cluster to test against, e.g. from scripts/kafka.sh)")
	}
	c := kafka.DefaultConfig()
	c.Brokers = strings.Split(brokers, ",")
	return c
}

func newPublisher(t testing.TB, c kafka.Config) *kafka.Publisher {
	t.Helper()
	p, err := kafka.New(c, pt.Logger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func freshTopic(prefix string) string {
	return fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
}

// admin is an admin client of the cluster and a 10 s context for its requests, both ended at the
// test's cleanup.
func admin(t testing.TB, c kafka.Config) (*kadm.Client, context.Context) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return kadm.NewClient(cl), ctx
}

// endOffsets are the topic's end offsets per partition, from the cluster (kadm: ListOffsets).
// A partition's leader can answer UNKNOWN_TOPIC_OR_PARTITION for a moment after the topic was
// created (its metadata has not reached that broker yet: seen on a new-machine CI run); retriable
// errors are asked again until the admin context ends.
func endOffsets(t testing.TB, c kafka.Config, topic string) map[int32]int64 {
	t.Helper()
	adm, ctx := admin(t, c)
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("ListEndOffsets %s: %v", topic, err)
		}
		out := map[int32]int64{}
		var retry error
		offs.Each(func(o kadm.ListedOffset) {
			switch {
			case o.Err == nil:
				out[o.Partition] = o.Offset
			case !kerr.IsRetriable(o.Err):
				t.Fatalf("end offset of %s/%d: %v", topic, o.Partition, o.Err)
			case retry == nil:
				retry = fmt.Errorf("end offset of %s/%d: %w", topic, o.Partition, o.Err)
			}
		})
		if retry == nil {
			return out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%v (still, when the admin context ended)", retry)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// toolOffsets counts with Kafka's own tool: scripts/kafka.sh tool GetOffsetShell, T:PARTITION:OFFSET lines.
func toolOffsets(t testing.TB, c kafka.Config, topic string) (map[int32]int64, bool) {
	t.Helper()
	script := os.Getenv("KAFKA_SCRIPT")
	if script == "" {
		return nil, false
	}
	var stderr bytes.Buffer
	cmd := exec.Command(script, "tool", "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", c.Brokers[0], "--topic", topic)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GetOffsetShell: %v\n%s", err, stderr.String())
	}
	offs := map[int32]int64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) != 3 || f[0] != topic {
			t.Fatalf("GetOffsetShell printed %q, want only %s:PARTITION:OFFSET lines", sc.Text(), topic)
		}
		p, err1 := strconv.Atoi(f[1])
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("GetOffsetShell line %q", sc.Text())
		}
		offs[int32(p)] = o
	}
	return offs, true
}

// leaders maps each partition of topic to its leader's node id.
func leaders(t testing.TB, c kafka.Config, topic string) map[int32]int32 {
	t.Helper()
	adm, ctx := admin(t, c)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int32{}
	for _, p := range md.Topics[topic].Partitions {
		out[p.Partition] = p.Leader
	}
	return out
}

// TestIntegrationLedger: for every host and method, the end offset of the partition led by that host's
// broker equals what was acknowledged, and no other partition holds anything.
func TestIntegrationLedger(t *testing.T) {
	testlane.Lock(t, "kafka") // the real brokers other packages stop and freeze too
	c := integrationConfig(t)
	p := newPublisher(t, c)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, method := range []string{"Publish", "PublishBatch", "PublishAsync"} {
		t.Run(method, func(t *testing.T) {
			topic := freshTopic("ledger_" + method)
			acked := make([]int64, len(p.Hosts()))
			timedOut := make([]int64, len(p.Hosts())) // records of publishes that timed out: stored or not
			outcome := func(host int, n int64, err error) {
				switch {
				case err == nil:
					acked[host] += n
				case errors.Is(err, publishers.ErrTimeout): // a loaded machine: the ledger may then hold them
					timedOut[host] += n
					t.Logf("host %d: %v", host, err)
				default:
					t.Errorf("host %d: %v", host, err)
				}
			}
			for host := range p.Hosts() {
				for i := range 20 {
					body := fmt.Appendf(nil, "%s host %d #%d", method, host, i)
					switch method {
					case "Publish":
						outcome(host, 1, p.Publish(ctx, host, topic, body))
					case "PublishBatch":
						outcome(host, 3, p.PublishBatch(ctx, host, topic, [][]byte{body, append(body, '+'), append(body, '-')}))
					case "PublishAsync":
						done := make(chan error, 1)
						if err := p.PublishAsync(host, topic, body, func(err error) { done <- err }); err != nil {
							t.Fatalf("host %d: %v", host, err)
						}
						outcome(host, 1, <-done)
					}
				}
			}
			lead := leaders(t, c, topic)
			if len(lead) < len(p.Hosts()) {
				t.Fatalf("topic %s has %d partitions, want at least one per broker (%d)", topic, len(lead), len(p.Hosts()))
			}
			check := func(who string, offs map[int32]int64) {
				var total, want int64
				for _, n := range acked {
					want += n
				}
				for part, n := range offs {
					total += n
					host := int(part)
					if host < len(p.Hosts()) {
						if n < acked[host] || n > acked[host]+timedOut[host] {
							t.Errorf("%s: partition %d (leader %d) holds %d, host %d acknowledged %d (%d more timed out)", who, part, lead[part], n, host, acked[host], timedOut[host])
						}
					} else if n != 0 {
						t.Errorf("%s: partition %d holds %d, nothing was published to it", who, part, n)
					}
				}
				var late int64
				for _, n := range timedOut {
					late += n
				}
				if total < want || total > want+late {
					t.Errorf("%s: the topic holds %d records, %d were acknowledged (%d more timed out)", who, total, want, late)
				}
				t.Logf("%s: end offsets %v, acknowledged per host %v, timed out %v", who, offs, acked, timedOut)
			}
			for part, node := range lead {
				if int(part) < len(p.Hosts()) && p.Hosts()[part] != brokerAddr(t, c, node) {
					t.Errorf("partition %d is led by node %d (%s), want host %d's broker %s", part, node, brokerAddr(t, c, node), part, p.Hosts()[part])
				}
			}
			check("kadm end offsets", endOffsets(t, c, topic))
			if offs, ok := toolOffsets(t, c, topic); ok {
				check("GetOffsetShell", offs)
			}
		})
	}
}

func brokerAddr(t testing.TB, c kafka.Config, node int32) string {
	t.Helper()
	adm, ctx := admin(t, c)
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.NodeID == node {
			return fmt.Sprintf("%s:%d", b.Host, b.Port)
		}
	}
	return ""
}

// TestIntegrationConsumer: what the publisher acknowledged comes back through the group consumer, each
// record once, with Delivery.Host the host it was published to.
func TestIntegrationConsumer(t *testing.T) {
	testlane.Lock(t, "kafka") // the real brokers other packages stop and freeze too
	c := integrationConfig(t)
	// The first publish creates the topic (leaders elected on both brokers): a busy CI run took past the
	// default 5 s. This test is about what comes back, not how fast.
	c.PublishTimeout = 20 * time.Second
	p := newPublisher(t, c)
	defer p.Close()
	topic := freshTopic("consume")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := map[string]int{}
	for host := range p.Hosts() {
		for i := range 10 {
			body := fmt.Sprintf("host %d #%d", host, i)
			if err := p.Publish(ctx, host, topic, []byte(body)); err != nil {
				t.Fatal(err)
			}
			want[body] = host
		}
	}
	cs, err := kafka.NewConsumer(c, publishers.ConsumerOptions{Group: freshTopic("group")}, pt.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var mu sync.Mutex
	got := map[string]int{}
	cctx, ccancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- cs.Consume(cctx, topic, func(d publishers.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			got[string(d.Body)]++
			if h, ok := want[string(d.Body)]; ok && h != d.Host {
				t.Errorf("%q: Delivery.Host %d, published to host %d", d.Body, d.Host, h)
			}
			if len(got) == len(want) {
				ccancel()
			}
		})
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(45 * time.Second):
		ccancel()
		<-errc
	}
	for host := range p.Hosts() {
		if err := p.Ping(ctx, host); err != nil {
			t.Errorf("Ping(%d): %v", host, err)
		}
		v, n := p.BrokerVersion(host), p.ConnCounts(host)
		if !strings.HasPrefix(v, "Kafka v") || n.Opened == 0 {
			t.Errorf("host %d: BrokerVersion %q, ConnCounts %+v; want a version and a connection", host, v, n)
		}
		t.Logf("host %d (%s): %s, connections %+v", host, p.Hosts()[host], v, n)
	}
	for body := range want {
		if got[body] != 1 {
			t.Errorf("%q consumed %d times, want once", body, got[body])
		}
	}
	if len(got) != len(want) {
		t.Errorf("consumed %d distinct records, published %d", len(got), len(want))
	}
}

// cluster is the conformance suite's broker side: a host's messages are its partition's records.
type cluster struct {
	c       kafka.Config
	p       *kafka.Publisher // for the host -> partition map of the topics it made
	script  string
	pidsMu  sync.Mutex
	frozen  map[int]int
	nodeIDs []int32
}

func (k *cluster) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	offs := endOffsets(t, k.c, topic)
	part := int32(host) // the topics the publisher creates: partition k led by broker k
	end := offs[part]
	if end == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out [][]byte
	for int64(len(out)) < end && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r.Value) })
	}
	return out
}

func (k *cluster) pid(t testing.TB, host int) int {
	t.Helper()
	out, err := exec.Command(k.script, "pid", fmt.Sprintf("broker-%d", host)).Output()
	if err != nil {
		t.Fatalf("%s pid broker-%d: %v", k.script, host, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	return pid
}

func (k *cluster) signal(t testing.TB, host int, sig syscall.Signal) {
	t.Helper()
	pid := k.pid(t, host)
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

func (k *cluster) FreezeHost(t testing.TB, host int) { pt.Freeze(t, k.pid(t, host)) }
func (k *cluster) ThawHost(t testing.TB, host int)   { k.signal(t, host, syscall.SIGCONT) }

// smallTopic creates a topic whose max.message.bytes is 1024, where the broker refuses larger batches.
func smallTopic(t testing.TB, c kafka.Config) string {
	t.Helper()
	adm, ctx := admin(t, c)
	topic := freshTopic("small")
	max := "1024"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &max}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	return topic
}

// TestIntegrationConformance runs the publishers' conformance suite against the cluster.
func TestIntegrationConformance(t *testing.T) {
	testlane.Lock(t, "kafka") // the real brokers other packages stop and freeze too
	c := integrationConfig(t) // publish_timeout 5 s: a first publish creates its topic, which took over 3 s in a busy CI run
	k := &cluster{c: c, script: os.Getenv("KAFKA_SCRIPT")}
	f := pt.Features{
		Rejections: []pt.Rejection{
			{Name: "over the client's batch bound", Topic: freshTopic("reject"), Body: bytes.Repeat([]byte("x"), 2<<20), Kind: publishers.ErrTooLarge},
			{Name: "internal topic", Topic: "__consumer_offsets", Body: []byte("x")},
			{Name: "over the topic's max.message.bytes", Topic: smallTopic(t, c), Body: bytes.Repeat([]byte("x"), 4096)},
		},
		AsyncTimeout: c.PublishTimeout,
	}
	if k.script == "" {
		f.NoFreeze = "KAFKA_SCRIPT is not set: no broker PIDs to stop"
	}
	// The same brokers' SASL listener (TestIntegrationSASL's), with a wrong password.
	if sasl := os.Getenv("KAFKA_SASL_BROKERS"); sasl != "" && os.Getenv("KAFKA_SASL_PASSWORD_FILE") != "" {
		f.BadLogin = func(t testing.TB) (publishers.Publisher, error) {
			b := c
			b.Brokers = strings.Split(sasl, ",")
			b.SASLMechanism, b.SASLUser = kafka.SASLScramSHA256, cmp.Or(os.Getenv("KAFKA_SASL_USER"), "mqtarget")
			b.SASLPasswordFile = wrongPasswordFile(t)
			return kafka.New(b, pt.Logger(t))
		}
	} else {
		f.NoLogin = "KAFKA_SASL_BROKERS and KAFKA_SASL_PASSWORD_FILE are not set (scripts/kafka.sh with KAFKA_SASL_PORT makes a SASL listener)"
	}
	pt.Run(t, f, k, func(t testing.TB) publishers.Publisher { return newPublisher(t, c) })
}

// TestIntegrationKill: kill -9 of broker 1 under publishing: its publishes fail as unavailable or
// timed out within publish_timeout, host 0's go on, and once the script started the broker again the
// same publisher delivers to it, with its goroutines back to what they were. Needs KAFKA_SCRIPT.
func TestIntegrationKill(t *testing.T) {
	testlane.Lock(t, "kafka") // the real brokers other packages stop and freeze too
	c := integrationConfig(t)
	script := os.Getenv("KAFKA_SCRIPT")
	if script == "" {
		t.Skip("KAFKA_SCRIPT is not set: no broker to kill and start again")
	}
	c.PublishTimeout = 3 * time.Second
	p := newPublisher(t, c)
	defer p.Close()
	if len(p.Hosts()) < 2 {
		t.Skip("needs two brokers")
	}
	topic := freshTopic("kill")
	publish := func(host int, body string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), c.PublishTimeout)
		defer cancel()
		start := time.Now()
		err := p.Publish(ctx, host, topic, []byte(body))
		return time.Since(start), err
	}
	acked := make([]int64, 2)
	for host := range 2 {
		if _, err := publish(host, "before"); err != nil {
			t.Fatalf("host %d before the kill: %v", host, err)
		}
		acked[host]++
	}
	time.Sleep(100 * time.Millisecond) // franz-go's goroutines for both brokers are up
	before := runtime.NumGoroutine()
	k := &cluster{c: c, script: script}
	k.signal(t, 1, syscall.SIGKILL)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = exec.Command(script, "start").Run()
		}
	})
	// Longer than the publisher's one second of refusals after a failure: then dials fail instead.
	for i := range 10 {
		time.Sleep(300 * time.Millisecond)
		took, err := publish(1, fmt.Sprintf("during %d", i))
		if err == nil {
			t.Errorf("publish %d to the killed broker acknowledged", i)
			acked[1]++
		} else if !errors.Is(err, publishers.ErrUnavailable) && !errors.Is(err, publishers.ErrTimeout) {
			t.Errorf("publish %d to the killed broker: %v, want ErrUnavailable or ErrTimeout", i, err)
		}
		if took > c.PublishTimeout+time.Second {
			t.Errorf("publish %d to the killed broker answered after %v (publish_timeout %v)", i, took, c.PublishTimeout)
		}
		t.Logf("publish %d to the killed broker: %v after %v", i, err, took.Round(time.Millisecond))
		if _, err := publish(0, fmt.Sprintf("during %d", i)); err != nil {
			t.Errorf("host 0 while broker 1 is down: %v", err)
		} else {
			acked[0]++
		}
	}
	start := time.Now()
	if out, err := exec.Command(script, "start").CombinedOutput(); err != nil {
		t.Fatalf("%s start: %v\n%s", script, err, out)
	}
	restarted = true
	t.Logf("broker 1 started again in %v", time.Since(start).Round(time.Second))
	start = time.Now()
	var err error
	for end := time.Now().Add(60 * time.Second); ; {
		if _, err = publish(1, "after"); err == nil {
			acked[1]++
			break
		}
		if time.Now().After(end) {
			t.Fatalf("host 1 does not deliver within 60 s of its broker's start: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("host 1 delivers again %v after the start returned", time.Since(start).Round(time.Millisecond))
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Errorf("goroutines: %d before the kill, %d after the recovery", before, after)
	}
	// what the cluster holds: at least what was acknowledged per host; more only by the publishes that
	// failed while the broker was down (none can have been stored: the broker was dead)
	offs := endOffsets(t, c, topic)
	for host := range 2 {
		if offs[int32(host)] != acked[host] {
			t.Errorf("partition %d holds %d, host %d acknowledged %d", host, offs[int32(host)], host, acked[host])
		}
	}
}

// TestIntegrationConsumerClose: Close ends a running Consume (which returns nil), is idempotent, and
// leaves no goroutine; Consume after Close is refused.
func TestIntegrationConsumerClose(t *testing.T) {
	testlane.Lock(t, "kafka") // the real brokers other packages stop and freeze too
	c := integrationConfig(t)
	ignore := goleak.IgnoreCurrent()
	cs, err := kafka.NewConsumer(c, publishers.ConsumerOptions{Group: freshTopic("close")}, pt.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- cs.Consume(context.Background(), freshTopic("close"), func(publishers.Delivery) {}) }()
	time.Sleep(time.Second) // let it join; Close must end it whatever it is doing
	for i := range 2 {
		if err := cs.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Consume ended by Close: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Consume still runs 10 s after Close returned")
	}
	if err := cs.Consume(context.Background(), "t", func(publishers.Delivery) {}); !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("Consume after Close: %v, want ErrClosed", err)
	}
	goleak.VerifyNone(t, ignore)
}

// TestIntegrationTLS: over the brokers' TLS listeners (scripts/kafka.sh with KAFKA_TLS_PORT;
// KAFKA_TLS_BROKERS their addresses, KAFKA_TLS_CA the CA file it made) the hosts are the TLS
// addresses, publishes are acknowledged and land where the ledger says; without the CA, New fails.
func TestIntegrationTLS(t *testing.T) {
	testlane.Lock(t, "kafka") // the real brokers other packages stop and freeze too
	c := configFrom(t, "KAFKA_TLS_BROKERS")
	c.Enabled, c.CAFile = true, os.Getenv("KAFKA_TLS_CA")
	p := newPublisher(t, c)
	defer p.Close()
	everyHostHolds(t, p, "tls")
	t.Logf("hosts over TLS: %v", p.Hosts())
	c.CAFile = ""
	if _, err := kafka.New(c, pt.Logger(t)); !errors.Is(err, publishers.ErrUnavailable) {
		t.Errorf("New with the system's roots: %v, want ErrUnavailable (unknown CA)", err)
	}
}

// TestIntegrationSASL: over the brokers' SASL listeners (scripts/kafka.sh with KAFKA_SASL_PORT;
// KAFKA_SASL_BROKERS their addresses, KAFKA_SASL_USER and KAFKA_SASL_PASSWORD_FILE the login it made)
// each mechanism logs in, publishes to every host and the cluster holds exactly that; a wrong password
// and an unknown user are refused at New, naming kafka.sasl_user, without waiting out the discovery.
func TestIntegrationSASL(t *testing.T) {
	testlane.Lock(t, "kafka") // the real brokers other packages stop and freeze too
	base := configFrom(t, "KAFKA_SASL_BROKERS")
	base.SASLUser, base.SASLPasswordFile = os.Getenv("KAFKA_SASL_USER"), os.Getenv("KAFKA_SASL_PASSWORD_FILE")
	if base.SASLUser == "" {
		base.SASLUser = "mqtarget" // scripts/kafka.sh's default
	}
	if base.SASLPasswordFile == "" {
		t.Fatal("KAFKA_SASL_BROKERS is set without KAFKA_SASL_PASSWORD_FILE (scripts/kafka.sh writes $KAFKA_DATA/sasl/password)")
	}
	wrong := wrongPasswordFile(t)
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c := base
			c.SASLMechanism = mech
			p := newPublisher(t, c)
			defer p.Close()
			everyHostHolds(t, p, "sasl")
			for _, bad := range []struct{ name, user, file string }{
				{"wrong password", c.SASLUser, wrong},
				{"unknown user", "nobody-" + strconv.FormatInt(time.Now().UnixNano(), 36), c.SASLPasswordFile},
			} {
				b := c
				b.SASLUser, b.SASLPasswordFile = bad.user, bad.file
				start := time.Now()
				_, err := kafka.New(b, pt.Logger(t))
				took := time.Since(start)
				if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "kafka.sasl_user") {
					t.Errorf("%s: New: %v, want ErrUnavailable naming kafka.sasl_user", bad.name, err)
				}
				if took > 5*time.Second {
					t.Errorf("%s: New answered after %v: a refused login is final, not worth retrying", bad.name, took.Round(time.Millisecond))
				}
			}
		})
	}
}

// wrongPasswordFile is a password file the SASL listener refuses.
func wrongPasswordFile(t testing.TB) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(f, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// everyHostHolds publishes one record and a batch of two to each of p's hosts (a fresh topic named
// from prefix) and checks, over the plain listener, that partition k (led by broker k, where host k
// publishes) holds exactly those 3 and every other partition nothing.
func everyHostHolds(t *testing.T, p *kafka.Publisher, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := freshTopic(prefix)
	for host := range p.Hosts() {
		if err := p.Publish(ctx, host, topic, []byte("one")); err != nil {
			t.Fatalf("host %d (%s): %v", host, p.Hosts()[host], err)
		}
		if err := p.PublishBatch(ctx, host, topic, [][]byte{[]byte("b1"), []byte("b2")}); err != nil {
			t.Fatalf("host %d: PublishBatch: %v", host, err)
		}
	}
	for part, n := range endOffsets(t, integrationConfig(t), topic) {
		want := int64(0)
		if int(part) < len(p.Hosts()) {
			want = 3
		}
		if n != want {
			t.Errorf("partition %d holds %d, want %d", part, n, want)
		}
	}
}
