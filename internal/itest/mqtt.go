package itest

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/testport"
)

// MQTT is the Harness for mosquitto brokers of scripts/mosquitto.sh that the test starts itself, on
// free loopback ports with their data in test temp dirs (the suite stops, kills and freezes them).
// An MQTT broker keeps nothing for a topic nobody subscribes to, so what a broker holds is what
// mosquitto's own subscriber, mosquitto_sub, started on '#' before anything is published, received
// from it: Stored counts that, Consume returns it. The subscriber's session is persistent (clean
// session off, QoS 1) and in the broker's persistence file before the test starts, so a broker killed
// with -9 and started again queues for it whatever it takes while the subscriber reconnects.
type MQTT struct {
	Addrs   []string // as mqtarget names the hosts
	Version string   // mqtt.version mqtarget speaks ("": the default)
	Ctl     []ScriptBroker
	recs    []*mqttRecorder
	// user and the files holding its password and a wrong one; empty: anonymous brokers
	user, passwordFile, wrongFile string
}

// NewMQTT starts n mosquitto brokers that take anonymous clients and a recording subscriber on each.
func NewMQTT(t testing.TB, n int) *MQTT { t.Helper(); return newMQTT(t, n, "", "") }

// NewMQTTLogin is NewMQTT with brokers that take one login only (MOSQUITTO_LOGIN), which mqtarget and
// the recorder use; the harness then implements LoginRefuser.
func NewMQTTLogin(t testing.TB, n int) *MQTT {
	t.Helper()
	return newMQTT(t, n, "mqtarget-itest", randomHex(8))
}

// newMQTT is NewMQTT with brokers that take only user's login, unless user is empty.
func newMQTT(t testing.TB, n int, user, pass string) *MQTT {
	t.Helper()
	h := &MQTT{user: user}
	var env []string
	if user != "" {
		dir := t.TempDir()
		h.passwordFile, h.wrongFile = filepath.Join(dir, "password"), filepath.Join(dir, "wrong")
		must(t, os.WriteFile(h.passwordFile, []byte(pass+"\n"), 0o600))
		must(t, os.WriteFile(h.wrongFile, []byte(pass+"-wrong\n"), 0o600))
		env = append(env, "MOSQUITTO_LOGIN="+user+":"+pass)
	}
	for range n {
		addr, data := testport.Addr(t), t.TempDir()
		traversable(t, data)
		_, port, _ := net.SplitHostPort(addr)
		h.Addrs = append(h.Addrs, addr)
		h.Ctl = append(h.Ctl, ScriptBroker{Script: scriptPath("mosquitto"), PIDFile: filepath.Join(data, "mqtarget-broker.pid"),
			Env: append([]string{"MOSQUITTO_PORT=" + port, "MOSQUITTO_DATA=" + data}, env...)})
	}
	startAll(t, h.Ctl)
	for i, addr := range h.Addrs {
		rec := startRecorder(t, addr, "mqtarget-itest-"+randomHex(4), h.user, pass)
		h.recs = append(h.recs, rec)
		// SIGUSR1: mosquitto writes its persistence file now, the recorder's session in it.
		db := filepath.Join(filepath.Dir(h.Ctl[i].PIDFile), "data", "mosquitto.db")
		must(t, syscall.Kill(h.Ctl[i].pid(t), syscall.SIGUSR1))
		waitFor(t, 10*time.Second, "mosquitto's persistence file "+db, func() bool { _, err := os.Stat(db); return err == nil })
	}
	return h
}

// traversable lets mosquitto, which drops to its own user when started as root, reach its data dir
// under the test's temp dirs (made 0700): o+x on each of dir's ancestors this process owns.
func traversable(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return // mosquitto keeps our user
	}
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == 0 && st.Mode().Perm()&0o001 == 0 {
			must(t, os.Chmod(d, st.Mode().Perm()|0o001))
		}
	}
}

func (h *MQTT) Broker() string       { return "mqtt" }
func (h *MQTT) InvalidTopic() string { return "bad%2Btopic" } // '+' is a wildcard
func (h *MQTT) Hosts() []string      { return h.Addrs }
func (h *MQTT) Configure(cfg *config.Config) {
	cfg.MQTT.Servers = h.Addrs
	if h.Version != "" {
		cfg.MQTT.Version = h.Version
	}
	cfg.MQTT.User, cfg.MQTT.PasswordFile = h.user, h.passwordFile
}

// BadLogin implements LoginRefuser for brokers made by NewMQTTLogin: the user with a wrong password.
func (h *MQTT) BadLogin(cfg *config.Config) bool {
	if h.user == "" {
		return false
	}
	h.Configure(cfg)
	cfg.MQTT.PasswordFile = h.wrongFile
	return true
}
func (h *MQTT) CanStop() bool                  { return true }
func (h *MQTT) StopHost(t testing.TB, i int)   { t.Helper(); h.Ctl[i].Stop(t) }
func (h *MQTT) StartHost(t testing.TB, i int)  { t.Helper(); h.Ctl[i].Start(t) }
func (h *MQTT) FreezeHost(t testing.TB, i int) { t.Helper(); h.Ctl[i].Freeze(t) }
func (h *MQTT) ThawHost(t testing.TB, i int)   { t.Helper(); h.Ctl[i].Thaw(t) }
func (h *MQTT) KillHost(t testing.TB, i int)   { t.Helper(); h.Ctl[i].Kill(t) }

// CrashLoss: mosquitto sends the PUBACK before it wrote the message to the subscriber, and saves its
// persistence file every autosave_interval: a kill -9 loses what it acknowledged and had not yet
// passed to the recording subscriber, a separate process that lags most when the machine is busiest
// (seen: 1 of 94 under the race detector alone; 13 of 101 in a CI run, 4 of them answered more than
// 250 ms before the kill). mosquitto acknowledges from memory by design: the window bounds that lag.
func (h *MQTT) CrashLoss() time.Duration { return 2 * time.Second }

// Stored is how many messages host's recording subscriber received on topic so far.
func (h *MQTT) Stored(t testing.TB, host int, topic string) int {
	return len(h.recs[host].messages(topic))
}

// Consume returns what host's recording subscriber received on topic, once want arrived (or the
// deadline passed) and then nothing more for 200 ms.
func (h *MQTT) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	t.Helper()
	return h.recs[host].wait(topic, want, deadline)
}

// ConsumeAll is Consume of at least atLeast messages.
func (h *MQTT) ConsumeAll(t testing.TB, host int, topic string, atLeast int) [][]byte {
	t.Helper()
	return h.recs[host].wait(topic, atLeast, 20*time.Second)
}

// mqttRecorder is a mosquitto_sub on '#' recording what it receives, by topic.
type mqttRecorder struct {
	cmd  *exec.Cmd
	done chan struct{} // its output ended
	mu   sync.Mutex
	got  map[string][][]byte
}

// startRecorder starts mosquitto_sub -d (its debug lines say when the SUBACK came) on addr with client
// id and clean session off (and user's login, unless empty), printing topic and hex payload per
// message, and waits for the SUBACK.
func startRecorder(t testing.TB, addr, id, user, pass string) *mqttRecorder {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	r := &mqttRecorder{done: make(chan struct{}), got: map[string][][]byte{}}
	// stdbuf: piped, mosquitto_sub's stdio would hold lines back in its buffer.
	args := []string{"-oL", "mosquitto_sub", "-d", "-h", host, "-p", port, "-t", "#", "-q", "1", "-c", "-i", id, "-F", "%t %x"}
	if user != "" {
		args = append(args, "-u", user, "-P", pass)
	}
	r.cmd = exec.Command("stdbuf", args...)
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("mosquitto_sub (Debian's mosquitto-clients): %v", err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); <-r.done; _ = r.cmd.Wait() })
	subscribed := make(chan struct{})
	go func() {
		defer close(r.done)
		once := sync.OnceFunc(func() { close(subscribed) })
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "Client ") || strings.HasPrefix(line, "Subscribed (mid") { // -d's lines
				if strings.Contains(line, "received SUBACK") {
					once()
				}
				continue
			}
			topic, payload, ok := strings.Cut(line, " ")
			body, err := hex.DecodeString(payload)
			if !ok || err != nil {
				body = []byte(line) // shows up as unparsable in the checks
			}
			r.mu.Lock()
			r.got[topic] = append(r.got[topic], body)
			r.mu.Unlock()
		}
	}()
	select {
	case <-subscribed:
	case <-r.done:
		t.Fatalf("mosquitto_sub on %s ended before its SUBACK", addr)
	case <-time.After(10 * time.Second):
		t.Fatalf("mosquitto_sub on %s: no SUBACK within 10s", addr)
	}
	return r
}

func (r *mqttRecorder) messages(topic string) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[topic])
}

// wait returns topic's messages once want arrived (or deadline passed) and none more came for 200 ms:
// a duplicate or a stray would come right behind.
func (r *mqttRecorder) wait(topic string, want int, deadline time.Duration) [][]byte {
	end := time.Now().Add(deadline)
	for len(r.messages(topic)) < want && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	for {
		n := len(r.messages(topic))
		time.Sleep(200 * time.Millisecond) // a window for what would follow, not synchronisation
		if len(r.messages(topic)) == n {
			return r.messages(topic)
		}
	}
}
