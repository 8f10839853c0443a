package itest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/testport"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// NSQDProc is a real nsqd process on loopback ports, restartable on the same ports and data.
type NSQDProc struct {
	bin      string
	dir      string
	TCPAddr  string
	HTTPAddr string
	args     []string // extra nsqd flags
	cmd      *exec.Cmd
	exited   chan struct{}
}

// StartNSQDProc starts nsqd from bin, with extra flags args and its data in a test temp dir; it is
// stopped at test cleanup.
func StartNSQDProc(t testing.TB, bin string, args ...string) *NSQDProc {
	t.Helper()
	p := &NSQDProc{bin: bin, dir: t.TempDir(), TCPAddr: testport.Addr(t), HTTPAddr: testport.Addr(t), args: args}
	t.Cleanup(func() { p.Stop(t) }) // first: a start that fails its readiness check leaves no nsqd behind
	p.Start(t)
	return p
}

// Start (re)starts the process and waits until its HTTP /ping answers OK.
func (p *NSQDProc) Start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(p.dir+"/nsqd.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(p.bin, "-tcp-address", p.TCPAddr, "-http-address", p.HTTPAddr,
		"-https-address", "", "-data-path", p.dir, "-broadcast-address", "127.0.0.1", "-log-level", "warn")
	p.cmd.Args = append(p.cmd.Args, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting nsqd: %v", err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}(p.cmd, p.exited)
	testwait.Until(t, 15*time.Second, "nsqd "+p.TCPAddr+" ready", func() error {
		select {
		case <-p.exited:
			log, _ := os.ReadFile(p.dir + "/nsqd.log")
			t.Fatalf("nsqd exited during start:\n%s", log)
		default:
		}
		resp, err := http.Get("http://" + p.HTTPAddr + "/ping")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ping: %s", resp.Status)
		}
		return nil
	})
}

// Stop terminates the process (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (p *NSQDProc) Stop(t testing.TB) {
	t.Helper()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Freeze stops the process with SIGSTOP (a broker that accepts nothing and answers nothing); Thaw resumes it.
func (p *NSQDProc) Freeze(t testing.TB) { t.Helper(); publishertest.Freeze(t, p.cmd.Process.Pid) }
func (p *NSQDProc) Thaw(t testing.TB)   { t.Helper(); must(t, p.cmd.Process.Signal(syscall.SIGCONT)) }

// NSQ is the Harness for a set of nsqd instances, external processes or embedded.
type NSQ struct {
	TCP   []string
	HTTP  []string
	Procs []*NSQDProc          // nil for embedded instances, which cannot be stopped from outside
	TLS   publishers.TLSConfig // mqtarget's and the harness consumer's nsq.tls* settings
	// AuthSecret is the harness consumer's nsq.auth_secret (an nsqd started with --auth-http-address)
	AuthSecret publishers.Secret
}

// NewNSQProcs starts n nsqd processes from bin.
func NewNSQProcs(t testing.TB, bin string, n int) *NSQ {
	h := &NSQ{}
	for range n {
		p := StartNSQDProc(t, bin)
		h.TCP = append(h.TCP, p.TCPAddr)
		h.HTTP = append(h.HTTP, p.HTTPAddr)
		h.Procs = append(h.Procs, p)
	}
	return h
}

func (h *NSQ) Broker() string                 { return "nsq" }
func (h *NSQ) InvalidTopic() string           { return "bad%20topic" }
func (h *NSQ) Hosts() []string                { return h.TCP }
func (h *NSQ) Configure(cfg *config.Config)   { cfg.NSQ.Hosts, cfg.NSQ.TLSConfig = h.TCP, h.TLS }
func (h *NSQ) StopHost(t testing.TB, i int)   { h.Procs[i].Stop(t) }
func (h *NSQ) StartHost(t testing.TB, i int)  { h.Procs[i].Start(t) }
func (h *NSQ) FreezeHost(t testing.TB, i int) { h.Procs[i].Freeze(t) }
func (h *NSQ) ThawHost(t testing.TB, i int)   { h.Procs[i].Thaw(t) }
func (h *NSQ) CanStop() bool                  { return h.Procs != nil }

// Stored returns how many messages nsqd ever accepted on topic (its message_count), 0 when the topic doesn't exist.
func (h *NSQ) Stored(t testing.TB, host int, topic string) int {
	t.Helper()
	resp, err := http.Get("http://" + h.HTTP[host] + "/stats?format=json&topic=" + topic)
	if err != nil {
		t.Fatalf("nsqd stats: %v", err)
	}
	defer resp.Body.Close()
	var stats struct {
		Topics []struct {
			Name         string `json:"topic_name"`
			MessageCount int    `json:"message_count"`
		} `json:"topics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatalf("nsqd stats: %v", err)
	}
	for _, tp := range stats.Topics {
		if tp.Name == topic {
			return tp.MessageCount
		}
	}
	return 0
}

// Consume reads messages of topic on host (channel "itest") until want have arrived or the deadline passes.
func (h *NSQ) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	return h.consume(t, host, topic, want, 0, deadline)
}

// consume is collect with the product's NSQ consumer on channel "itest" of host.
func (h *NSQ) consume(t testing.TB, host int, topic string, want int, grace, deadline time.Duration) [][]byte {
	t.Helper()
	cfg := nsq.DefaultConfig()
	cfg.Hosts = []string{h.TCP[host]}
	cfg.TLSConfig = h.TLS
	cfg.AuthSecret = h.AuthSecret
	cons, err := nsq.NewConsumer(cfg, publishers.ConsumerOptions{Group: "itest"}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	return collect(t, cons, 0, topic, want, grace, deadline)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Kill sends SIGKILL (a crash: nothing flushed, no goodbye to clients) and waits for the process to end.
func (p *NSQDProc) Kill(t testing.TB) {
	t.Helper()
	must(t, p.cmd.Process.Kill())
	<-p.exited
}

func (h *NSQ) KillHost(t testing.TB, i int) { h.Procs[i].Kill(t) }

// ConsumeAll reads every message of topic on host: what arrives until atLeast have and nothing more
// came for a second (nsqd pushes what it holds at once; its message_count restarts with the process,
// so it cannot say how many to expect after a kill).
func (h *NSQ) ConsumeAll(t testing.TB, host int, topic string, atLeast int) [][]byte {
	t.Helper()
	return h.consume(t, host, topic, max(atLeast, 1), time.Second, 20*time.Second)
}

// EmbeddedNSQ starts n in-process nsqd instances and an NSQ publisher to them, both closed at cleanup,
// and returns the publisher's configuration (its Hosts are the instances) and the publisher.
func EmbeddedNSQ(t testing.TB, n int) (nsq.Config, publishers.Publisher) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	e, err := nsq.StartNSQD(n, 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	cfg := nsq.DefaultConfig()
	cfg.Hosts = e.TCPAddrs()
	pub, err := nsq.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return cfg, pub
}

// NSQDBin returns the nsqd binary scripts/test.sh built; with MQTARGET_INTEGRATION set it must exist.
func NSQDBin(t testing.TB) string {
	t.Helper()
	bin := SetEnv(t, "MQTARGET_NSQD_BIN", "scripts/test.sh builds nsqd and sets it")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MQTARGET_NSQD_BIN: %v", err)
	}
	return bin
}
