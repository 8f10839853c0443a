package mqtt

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
)

// serversEnv names the real brokers of the integration test: MQTARGET_MQTT_TEST_SERVERS=host:port,... of
// independent mosquitto servers started by scripts/mosquitto.sh (see docs/mqtt.md).
const serversEnv = "MQTARGET_MQTT_TEST_SERVERS"

func realServers(t *testing.T) []string {
	t.Helper()
	v := os.Getenv(serversEnv)
	if v == "" {
		t.Skip(serversEnv + " is not set (host:port list of mosquitto servers, e.g. started by scripts/mosquitto.sh)")
	}
	if _, err := exec.LookPath("mosquitto_sub"); err != nil {
		t.Skip("mosquitto_sub not found (Debian's mosquitto-clients; scripts/mosquitto.sh start installs it)")
	}
	return strings.Split(v, ",")
}

// mosquittoSub is mosquitto's own subscriber counting what one server delivers on a topic.
type mosquittoSub struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	got  [][]byte
	more chan struct{} // a message arrived (buffered 1)
	done chan struct{} // the output ended
}

// startSub starts mosquitto_sub -d (its debug lines say when the SUBACK came, so the test knows the
// subscription exists before it publishes) on addr and topic at QoS 1, and waits for the SUBACK.
func startSub(t *testing.T, addr, topic string) *mosquittoSub {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	s := &mosquittoSub{more: make(chan struct{}, 1), done: make(chan struct{})}
	// stdbuf: piped, mosquitto_sub's stdio would hold the SUBACK line (and messages) in its buffer.
	s.cmd = exec.Command("stdbuf", "-oL", "mosquitto_sub", "-d", "-h", host, "-p", port, "-t", topic, "-q", "1", "-W", "120")
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); <-s.done; _ = s.cmd.Wait() })
	subscribed := make(chan struct{})
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.OnceFunc(func() { close(subscribed) })
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "Client ") || strings.HasPrefix(line, "Subscribed (mid") { // -d's lines
				if strings.Contains(line, "received SUBACK") {
					once()
				}
				continue
			}
			s.mu.Lock()
			s.got = append(s.got, []byte(line))
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
		}
	}()
	select {
	case <-subscribed:
	case <-s.done:
		t.Fatalf("mosquitto_sub on %s ended before its SUBACK", addr)
	case <-time.After(10 * time.Second):
		t.Fatalf("mosquitto_sub on %s: no SUBACK within 10s", addr)
	}
	return s
}

func (s *mosquittoSub) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// wait returns what arrived once want messages did (or deadline passed) and then nothing more for a
// while: a duplicate would come right behind.
func (s *mosquittoSub) wait(want int, deadline time.Duration) [][]byte {
	end := time.Now().Add(deadline)
	for s.count() < want && time.Now().Before(end) {
		select {
		case <-s.more:
		case <-time.After(time.Until(end)):
		}
	}
	for {
		n := s.count()
		select {
		case <-s.more:
		case <-time.After(500 * time.Millisecond):
		}
		if s.count() == n {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// TestIntegrationLedger publishes to each real server in turn, with every method and QoS, and checks
// with mosquitto_sub subscribers started first on every server that server k got exactly what was
// acknowledged for host k (no loss, no duplicate) and the other servers nothing; at MQTT 5 and 3.1.1.
func TestIntegrationLedger(t *testing.T) {
	testlane.Lock(t, "mqtt") // the real brokers other packages stop and freeze too
	servers := realServers(t)
	for _, tc := range versionsQoS() {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Servers = servers
			c.QoS = tc.qos
			c.Version = tc.version
			p, err := New(c, discard())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close() }()
			for k := range servers {
				var r [6]byte
				_, _ = rand.Read(r[:])
				topic := "mqtarget_it_" + hex.EncodeToString(r[:])
				subs := make([]*mosquittoSub, len(servers))
				for i, a := range servers {
					subs[i] = startSub(t, a, topic)
				}
				var acked [][]byte
				seq := 0
				body := func() []byte { seq++; return fmt.Appendf(nil, "mqtarget-it %s %d", topic, seq) }
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				for range 20 {
					b := body()
					if err := p.Publish(ctx, k, topic, b); err != nil {
						t.Fatalf("host %d: Publish: %v", k, err)
					}
					acked = append(acked, b)
				}
				for range 5 {
					batch := [][]byte{body(), body()}
					if err := p.PublishBatch(ctx, k, topic, batch); err != nil {
						t.Fatalf("host %d: PublishBatch: %v", k, err)
					}
					acked = append(acked, batch...)
				}
				cancel()
				var mu sync.Mutex
				var wg sync.WaitGroup
				for range 30 {
					b := body()
					wg.Add(1)
					if err := p.PublishAsync(k, topic, b, func(err error) {
						defer wg.Done()
						if err != nil {
							t.Errorf("host %d: PublishAsync done: %v", k, err)
							return
						}
						mu.Lock()
						acked = append(acked, b)
						mu.Unlock()
					}); err != nil {
						wg.Done()
						t.Fatalf("host %d: PublishAsync: %v", k, err)
					}
				}
				wg.Wait()
				for i, s := range subs {
					want := 0
					if i == k {
						want = len(acked)
					}
					got := s.wait(want, 15*time.Second)
					if i != k {
						if len(got) != 0 {
							t.Errorf("server %d got %d messages published to host %d", i, len(got), k)
						}
						continue
					}
					if !sameSet(got, acked) {
						t.Errorf("server %d holds %d messages, %d acknowledged (duplicates or strays or loss)", i, len(got), len(acked))
					}
				}
				t.Logf("host %d (%s): %d acknowledged, %d counted by mosquitto_sub", k, servers[k], len(acked), subs[k].count())
			}
			for k := range servers {
				// The retained $SYS PUBLISH may come after the acknowledgements of the publishes above.
				testwait.Until(t, 5*time.Second, fmt.Sprintf("host %d's mosquitto version", k), func() error {
					if v := p.BrokerVersion(k); !strings.Contains(v, "mosquitto") {
						return fmt.Errorf("BrokerVersion = %q", v)
					}
					return nil
				})
				if n := p.ProtocolErrors(k); n != 0 {
					t.Errorf("ProtocolErrors(%d) = %d against mosquitto", k, n)
				}
				if n := p.ConnCounts(k); n.Opened != 1 {
					t.Errorf("ConnCounts(%d) = %+v, want one connection", k, n)
				}
			}
		})
	}
}

// sameSet reports whether a and b hold the same bodies the same number of times.
func sameSet(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	n := map[string]int{}
	for _, x := range a {
		n[string(x)]++
	}
	for _, x := range b {
		n[string(x)]--
	}
	for _, v := range n {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestIntegrationConsumer: the project's consumer, at MQTT 5 and 3.1.1 and QoS 1 and 2, subscribed to
// a topic on every real server, receives from server k exactly what was acknowledged for host k, once
// each and named with its host (the round trip's and the echo's consumer; mosquitto_sub counts the
// same in TestIntegrationLedger).
func TestIntegrationConsumer(t *testing.T) {
	testlane.Lock(t, "mqtt")
	servers := realServers(t)
	for _, tc := range versionsQoS() {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Servers, c.QoS, c.Version = servers, tc.qos, tc.version
			p, err := New(c, discard())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close() }()
			cons, err := NewConsumer(c, publishers.ConsumerOptions{}, discard())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cons.Close() }()
			var r [6]byte
			_, _ = rand.Read(r[:])
			topic := "mqtarget_itc_" + hex.EncodeToString(r[:])
			var mu sync.Mutex
			got := make([][][]byte, len(servers))
			more := make(chan struct{}, 1)
			ctx, cancel := context.WithCancel(context.Background())
			consumed := make(chan error, 1)
			go func() {
				consumed <- cons.Consume(ctx, topic, func(d publishers.Delivery) {
					mu.Lock()
					got[d.Host] = append(got[d.Host], slices.Clone(d.Body))
					mu.Unlock()
					select {
					case more <- struct{}{}:
					default:
					}
				})
			}()
			count := func(k int, prefix string) int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, b := range got[k] {
					if strings.HasPrefix(string(b), prefix) {
						n++
					}
				}
				return n
			}
			// The subscriptions exist some time after Consume started: a sentinel per host until one
			// comes back (a broker keeps nothing for a subscriber not yet there).
			for k := range servers {
				deadline := time.Now().Add(10 * time.Second)
				for i := 0; count(k, "sentinel") == 0; i++ {
					if time.Now().After(deadline) {
						t.Fatalf("host %d: no sentinel back within 10s", k)
					}
					if err := p.Publish(context.Background(), k, topic, fmt.Appendf(nil, "sentinel %d", i)); err != nil {
						t.Fatalf("host %d: sentinel: %v", k, err)
					}
					select {
					case <-more:
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
			acked := make([][][]byte, len(servers))
			for k := range servers {
				var wg sync.WaitGroup
				for i := range 40 {
					b := fmt.Appendf(nil, "m %d %d", k, i)
					if i%2 == 0 {
						if err := p.Publish(context.Background(), k, topic, b); err != nil {
							t.Fatalf("host %d: Publish: %v", k, err)
						}
						mu.Lock()
						acked[k] = append(acked[k], b)
						mu.Unlock()
						continue
					}
					wg.Add(1)
					if err := p.PublishAsync(k, topic, b, func(err error) {
						defer wg.Done()
						if err != nil {
							t.Errorf("host %d: PublishAsync done: %v", k, err)
							return
						}
						mu.Lock()
						acked[k] = append(acked[k], b)
						mu.Unlock()
					}); err != nil {
						wg.Done()
						t.Fatalf("host %d: PublishAsync: %v", k, err)
					}
				}
				wg.Wait()
			}
			for k := range servers {
				end := time.Now().Add(15 * time.Second)
				for count(k, "m ") < len(acked[k]) && time.Now().Before(end) { // the publishes are done
					select {
					case <-more:
					case <-time.After(time.Until(end)):
					}
				}
			}
			<-time.After(300 * time.Millisecond) // a duplicate would come right behind
			cancel()
			if err := <-consumed; err != nil {
				t.Errorf("Consume: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for k := range servers {
				var msgs [][]byte
				for _, b := range got[k] {
					if strings.HasPrefix(string(b), "m ") {
						msgs = append(msgs, b)
					}
				}
				if !sameSet(msgs, acked[k]) {
					t.Errorf("host %d: the consumer got %d messages, %d acknowledged (loss, duplicates or another host's)", k, len(msgs), len(acked[k]))
				}
				t.Logf("host %d: %d acknowledged, %d consumed", k, len(acked[k]), len(msgs))
			}
		})
	}
}
