// Package itest is the integration suite shared by every broker: it runs mqtarget's real HTTP server
// against real brokers and consumes the messages back to check that exactly the acknowledged ones arrived.
package itest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/serve"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/message"
)

// Harness is one broker set-up the suite drives.
type Harness interface {
	Broker() string                                  // broker name for ?broker=
	InvalidTopic() string                            // a topic name this broker rejects, URL-escaped
	Hosts() []string                                 // host addresses, as mqtarget reports them in replies
	Configure(cfg *config.Config)                    // points cfg at the broker
	Stored(t testing.TB, host int, topic string) int // messages the broker holds or has delivered on topic
	Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte
	CanStop() bool
	StopHost(t testing.TB, host int)
	StartHost(t testing.TB, host int)
	FreezeHost(t testing.TB, host int)
	ThawHost(t testing.TB, host int)
}

// PublishTimeout is the publish timeout the suite configures; fault tests bound answers by it.
const PublishTimeout = 2 * time.Second

// Target is a running mqtarget under test.
type Target struct {
	App   *serve.App
	Base  string // http://127.0.0.1:port
	h     Harness
	label string // targetLabel's value on the target's goroutines (goroutines.go)
}

// StartTarget starts mqtarget configured for h (nil: the embedded default) and shuts it down at cleanup.
func StartTarget(t testing.TB, h Harness, mutate func(*config.Config)) *Target {
	t.Helper()
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.PublishTimeout = PublishTimeout
	cfg.ShutdownGrace = 10 * time.Second
	if h != nil {
		cfg.Broker = h.Broker()
		h.Configure(&cfg)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var a *serve.App
	var err error
	label := labelled(func() { a, err = serve.Start(cfg, log) })
	if err != nil {
		t.Fatalf("serve.Start: %v", err)
	}
	tg := &Target{App: a, Base: "http://" + a.Addr(), h: h, label: label}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return tg
}

// Reply is a send endpoint's JSON answer.
type Reply struct {
	Status    int
	Broker    string `json:"broker"`
	Topic     string `json:"topic"`
	Published int    `json:"published"`
	Accepted  int    `json:"accepted"`
	Messages  []struct {
		ID    string `json:"id"`
		Topic string `json:"topic"`
		Host  string `json:"host"`
		Size  int    `json:"size"`
	} `json:"messages"`
	Error string  `json:"error"`
	Field string  `json:"field"`
	RTTMs float64 `json:"rtt_ms"` // /sendRoundTrip
	Took  time.Duration
	Body  string `json:"-"` // the reply as sent, for failure messages
}

var client = &http.Client{Timeout: 30 * time.Second}

// Do sends a request to path (with query) and decodes the JSON reply.
func (tg *Target) Do(t testing.TB, method, path string, body []byte) Reply {
	t.Helper()
	req, err := http.NewRequest(method, tg.Base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := Reply{Status: resp.StatusCode, Took: time.Since(start), Body: string(raw)}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, raw)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s %s: reply is not JSON: %v: %s", method, path, err, raw)
	}
	return r
}

// Get is Do with GET and no body.
func (tg *Target) Get(t testing.TB, path string) Reply {
	t.Helper()
	return tg.Do(t, http.MethodGet, path, nil)
}

// uniqueTopic returns a fresh topic name so tests sharing brokers never see each other's messages.
func uniqueTopic(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// key addresses the messages of one topic on one host.
type key struct {
	host  int
	topic string
}

// ledger collects what mqtarget acknowledged, to compare with what the broker has.
type ledger struct {
	mu    sync.Mutex
	hosts []string
	ids   map[key]map[string]int // id -> size
}

func newLedger(hosts []string) *ledger { return &ledger{hosts: hosts, ids: map[key]map[string]int{}} }

func (l *ledger) add(t testing.TB, r Reply) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range r.Messages {
		host := slices.Index(l.hosts, m.Host)
		if host < 0 {
			t.Fatalf("reply names host %q, not one of %v", m.Host, l.hosts)
		}
		k := key{host, m.Topic}
		if l.ids[k] == nil {
			l.ids[k] = map[string]int{}
		}
		if _, dup := l.ids[k][m.ID]; dup {
			t.Fatalf("id %s acknowledged twice", m.ID)
		}
		l.ids[k][m.ID] = m.Size
	}
}

// verify consumes every (host, topic) in the ledger and checks the broker holds exactly those messages:
// same ids, same sizes, no duplicates, nothing missing, nothing extra.
func (l *ledger) verify(t *testing.T, h Harness) {
	t.Helper()
	for k, want := range l.ids {
		got := h.Consume(t, k.host, k.topic, len(want), 20*time.Second)
		seen := map[string]bool{}
		for _, body := range got {
			id, _, err := message.Parse(body)
			if err != nil {
				t.Errorf("host %d topic %s: unparsable message %q: %v", k.host, k.topic, body[:min(len(body), 40)], err)
				continue
			}
			size, ok := want[id]
			switch {
			case !ok:
				t.Errorf("host %d topic %s: message %s was never acknowledged", k.host, k.topic, id)
			case seen[id]:
				t.Errorf("host %d topic %s: message %s delivered twice", k.host, k.topic, id)
			case len(body) != size:
				t.Errorf("host %d topic %s: message %s has %d bytes, want %d", k.host, k.topic, id, len(body), size)
			}
			seen[id] = true
		}
		for id := range want {
			if !seen[id] {
				t.Errorf("host %d topic %s: acknowledged message %s never arrived", k.host, k.topic, id)
			}
		}
		if n := h.Stored(t, k.host, k.topic); n != len(want) {
			t.Errorf("host %d topic %s: broker counts %d messages, %d were acknowledged", k.host, k.topic, n, len(want))
		}
	}
}

// deliveryTimeout is the publish timeout of the delivery test, below http.write_timeout (15 s).
const deliveryTimeout = 10 * time.Second

// warmSlots is at least the connections per host of every broker's defaults (warmUp dials them all).
const warmSlots = 4

// Requests per endpoint in the delivery test; a multiple of 6 so /send2Host and /send3Host spread evenly.
const perEndpoint = 12

// RunSuite runs every part of the suite against h, as subtests.
func RunSuite(t *testing.T, h Harness) {
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })
	t.Run("bad input", func(t *testing.T) { RunBadInput(t, h) })
	t.Run("shutdown drains async", func(t *testing.T) { RunShutdownDrains(t, h) })
	t.Run("broker down", func(t *testing.T) { RunBrokerDown(t, h) })
	t.Run("refused login", func(t *testing.T) { RunRefusedLogin(t, h) })
}

// LoginRefuser is a Harness whose broker can refuse a login: BadLogin points cfg at it with one it
// refuses (a wrong password), or reports false when the broker takes any.
type LoginRefuser interface {
	BadLogin(cfg *config.Config) bool
}

// RunRefusedLogin: with a login the broker refuses, mqtarget starts (connections are made on first
// use), a request soon answers 503 with the broker's refusal, every sync send endpoint answers 503
// within the publish timeout, /readyz answers 503, and the broker holds nothing of it. (On a loaded
// machine a handshake may outlast the dial timeout before the broker's refusal arrives: also 503, but
// without its words, so only the first proof needs them.)
func RunRefusedLogin(t *testing.T, h Harness) {
	lr, ok := h.(LoginRefuser)
	var cfg config.Config
	if !ok || !lr.BadLogin(&cfg) {
		t.Skip("the broker takes any login")
	}
	tg := StartTarget(t, h, func(c *config.Config) { lr.BadLogin(c) })
	topic := uniqueTopic("itlogin")
	q := "?topic=" + topic
	testwait.Until(t, 20*time.Second, "/send1 answering 503 with the broker's refusal", func() error {
		if r := tg.Get(t, "/send1"+q); r.Status != http.StatusServiceUnavailable || !strings.Contains(strings.ToLower(r.Error), "refused") {
			return fmt.Errorf("%d %q", r.Status, r.Error)
		}
		return nil
	})
	bound := PublishTimeout + time.Second
	for _, p := range []string{"/send1", "/send2", "/send2Topic", "/sendAsyncWait"} {
		r := tg.Get(t, p+q)
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: %d %q, want 503", p, r.Status, r.Error)
		}
		if r.Took > bound {
			t.Errorf("%s: answered after %v, want within %v", p, r.Took, bound)
		}
	}
	if r := tg.Get(t, "/readyz"); r.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz with a refused login: %d, want 503", r.Status)
	}
	if n := h.Stored(t, 0, topic); n != 0 {
		t.Errorf("the broker holds %d messages sent with a refused login", n)
	}
}

// RunDelivery drives every send endpoint and checks the broker holds exactly the acknowledged messages,
// on the right hosts and topics.
func RunDelivery(t *testing.T, h Harness) {
	// Every case publishes to topics of its own; a broker that creates a topic on first use (one that
	// waits for a partition leader) can take longer than PublishTimeout for that first publish on a
	// busy machine. This test is about what arrives, not how fast: the fault tests bound answers by
	// PublishTimeout.
	tg := StartTarget(t, h, func(cfg *config.Config) { cfg.PublishTimeout = deliveryTimeout })
	hosts := h.Hosts()
	t.Run("broker versions on the index", func(t *testing.T) { checkVersions(t, tg, h.Broker()) })
	warmUp(t, tg, len(hosts))
	cases := []struct {
		name      string
		path      string
		status    int
		perReq    int
		wantHosts []int // hosts the messages must land on, in round-robin order
		topics    int   // distinct topics expected
	}{
		{"send1", "/send1", 200, 1, []int{0}, 1},
		{"send2 batch", "/send2", 200, 2, []int{0}, 1},
		{"send2 sequential", "/send2?mode=sequential", 200, 2, []int{0}, 1},
		{"send2Topic", "/send2Topic", 200, 2, []int{0}, 2},
		{"sendAsync", "/sendAsync", 202, 1, []int{0}, 1},
		{"sendAsyncWait", "/sendAsyncWait", 200, 1, []int{0}, 1},
		{"send2Host", "/send2Host", 200, 1, []int{0, 1}, 1},
		{"send3Host", "/send3Host", 200, 1, []int{0, 1, 2}, 1},
		{"send1 size 1000", "/send1?size=1000", 200, 1, []int{0}, 1},
		{"send1 topics=3", "/send1?topics=3", 200, 1, []int{0}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(hosts) < len(c.wantHosts) {
				t.Skipf("needs %d hosts", len(c.wantHosts))
			}
			l := newLedger(hosts)
			topic, topic2 := uniqueTopic("it"), uniqueTopic("it2")
			sep := "?"
			if strings.Contains(c.path, "?") {
				sep = "&"
			}
			hostCount := map[int]int{}
			topicSet := map[string]bool{}
			for i := range perEndpoint {
				method := http.MethodGet
				if i%2 == 1 {
					method = http.MethodPost // POST without a body behaves like GET
				}
				q := "topic=" + topic
				if strings.HasPrefix(c.path, "/send2Topic") { // the only endpoint that takes topic2
					q += "&topic2=" + topic2
				}
				r := tg.Do(t, method, c.path+sep+q, nil)
				if r.Status != c.status {
					t.Fatalf("request %d: status %d (%s), want %d", i, r.Status, r.Error, c.status)
				}
				if n := r.Published + r.Accepted; n != c.perReq || len(r.Messages) != c.perReq {
					t.Fatalf("request %d: %d messages in reply, want %d", i, n, c.perReq)
				}
				wantHost := hosts[c.wantHosts[i%len(c.wantHosts)]]
				for _, m := range r.Messages {
					if m.Host != wantHost {
						t.Fatalf("request %d: host %s, want %s (round-robin)", i, m.Host, wantHost)
					}
					hostCount[slices.Index(hosts, m.Host)]++
					topicSet[m.Topic] = true
				}
				l.add(t, r)
			}
			if len(topicSet) != c.topics {
				t.Errorf("messages went to %d topics %v, want %d", len(topicSet), topicSet, c.topics)
			}
			for _, hi := range c.wantHosts {
				if want := perEndpoint * c.perReq / len(c.wantHosts); hostCount[hi] != want {
					t.Errorf("host %d got %d messages, want %d", hi, hostCount[hi], want)
				}
			}
			l.verify(t, h)
		})
	}
	t.Run("POST body is the payload", func(t *testing.T) {
		topic := uniqueTopic("itbody")
		body := []byte(`{"order":42,"note":"verbatim payload"}`)
		r := tg.Do(t, http.MethodPost, "/send1?topic="+topic, body)
		if r.Status != 200 || len(r.Messages) != 1 || r.Messages[0].Size != len(body) {
			t.Fatalf("status %d messages %+v: %s", r.Status, r.Messages, r.Error)
		}
		got := h.Consume(t, 0, topic, 1, 20*time.Second)
		if len(got) != 1 || !bytes.Equal(got[0], body) {
			t.Fatalf("broker has %q, want exactly the POST body", got)
		}
	})
}

// RunBadInput checks that bad input answers 4xx JSON naming the field, publishes nothing, and the
// service keeps serving.
func RunBadInput(t *testing.T, h Harness) {
	tg := StartTarget(t, h, func(c *config.Config) { c.Message.MaxSize = 4096 })
	topic := uniqueTopic("itbad")
	cases := []struct {
		name   string
		method string
		path   string
		body   []byte
		status int
		field  string
	}{
		{"unknown broker", "GET", "/send1?broker=pulsar", nil, 400, "broker"},
		{"bad topic", "GET", "/send1?topic=" + h.InvalidTopic(), nil, 400, "topic"},
		{"empty topic", "GET", "/send1?topic=", nil, 400, "topic"},
		{"bad topic2", "GET", "/send2Topic?topic2=" + h.InvalidTopic(), nil, 400, "topic2"},
		{"size zero", "GET", "/send1?size=0", nil, 400, "size"},
		{"size negative", "GET", "/send1?size=-5", nil, 400, "size"},
		{"size over max", "GET", "/send1?size=4097", nil, 400, "size"},
		{"size not a number", "GET", "/send1?size=ten", nil, 400, "size"},
		{"topics zero", "GET", "/send1?topics=0", nil, 400, "topics"},
		{"mode unknown", "GET", "/send2?mode=parallel", nil, 400, "mode"},
		{"unknown parameter", "GET", "/send1?szie=10", nil, 400, "szie"},
		{"oversized body", "POST", "/send1", bytes.Repeat([]byte("a"), 4097), 413, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sep := "?"
			if strings.Contains(c.path, "?") {
				sep = "&"
			}
			path := c.path
			if !strings.Contains(c.path, "topic=") {
				path += sep + "topic=" + topic
			}
			r := tg.Do(t, c.method, path, c.body)
			if r.Status != c.status || r.Field != c.field || r.Error == "" {
				t.Fatalf("got %d field %q error %q, want %d field %q", r.Status, r.Field, r.Error, c.status, c.field)
			}
		})
	}
	if n := h.Stored(t, 0, topic); n != 0 {
		t.Errorf("bad requests published %d messages", n)
	}
	if r := tg.Get(t, "/send1?topic="+topic); r.Status != 200 {
		t.Fatalf("service no longer serves after bad input: %d %s", r.Status, r.Error)
	}
}

// RunBrokerDown stops (and freezes) host 0 and checks the sync endpoints answer 503/504 within the
// publish timeout, then that requests succeed again once the broker is back, without a restart.
func RunBrokerDown(t *testing.T, h Harness) {
	if !h.CanStop() {
		t.Skip("harness cannot stop its broker")
	}
	tg := StartTarget(t, h, nil)
	topic := uniqueTopic("itdown")
	q := "?topic=" + topic
	if r := tg.Get(t, "/send1"+q); r.Status != 200 {
		t.Fatalf("before the fault: %d %s", r.Status, r.Error)
	}
	syncPaths := []string{"/send1", "/send2", "/send2?mode=sequential", "/send2Topic", "/sendAsyncWait"}
	bound := PublishTimeout + time.Second
	check := func(t *testing.T, allowed ...int) {
		// At once: against a frozen broker each waits out the publish timeout.
		replies := make([]Reply, len(syncPaths))
		var wg sync.WaitGroup
		for i, p := range syncPaths {
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			wg.Go(func() { replies[i] = tg.Get(t, p+sep+q[1:]) })
		}
		wg.Wait()
		for i, p := range syncPaths {
			r := replies[i]
			if !slices.Contains(allowed, r.Status) {
				t.Errorf("%s: status %d (%s), want one of %v", p, r.Status, r.Error, allowed)
			}
			if r.Took > bound {
				t.Errorf("%s: answered after %v, want within %v", p, r.Took, bound)
			}
		}
	}
	recover := func(t *testing.T) {
		testwait.Until(t, 20*time.Second, "/send1 succeeds after the broker is back", func() error {
			if r := tg.Get(t, "/send1"+q); r.Status != 200 {
				return fmt.Errorf("%d %s", r.Status, r.Error)
			}
			return nil
		})
	}
	t.Run("stopped", func(t *testing.T) {
		h.StopHost(t, 0)
		check(t, http.StatusServiceUnavailable, http.StatusGatewayTimeout)
		if r := tg.Get(t, "/readyz"); r.Status != http.StatusServiceUnavailable {
			t.Errorf("/readyz with a broker down: %d, want 503", r.Status)
		}
		h.StartHost(t, 0)
		recover(t)
		// Eventually: /readyz pings on a connection of its own within readyz.timeout, which a broker
		// restarted a moment ago (a cold JVM) may miss once although it took the publish above.
		testwait.Until(t, 10*time.Second, "/readyz answers 200 after recovery", func() error {
			if r := tg.Get(t, "/readyz"); r.Status != http.StatusOK {
				return fmt.Errorf("%d %s", r.Status, strings.TrimSpace(r.Body))
			}
			return nil
		})
	})
	t.Run("frozen", func(t *testing.T) {
		h.FreezeHost(t, 0)
		thawed := false
		defer func() {
			if !thawed {
				h.ThawHost(t, 0)
			}
		}()
		check(t, http.StatusGatewayTimeout, http.StatusServiceUnavailable)
		h.ThawHost(t, 0)
		thawed = true
		recover(t)
	})
}

// RunShutdownDrains fires async publishes and shuts down at once: every accepted message must reach the
// broker before the publishers close.
func RunShutdownDrains(t *testing.T, h Harness) {
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Broker = h.Broker()
	h.Configure(&cfg)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := serve.Start(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	tg := &Target{App: a, Base: "http://" + a.Addr(), h: h}
	topic := uniqueTopic("itdrain")
	l := newLedger(h.Hosts())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if r := tg.Get(t, "/sendAsync?topic="+topic); r.Status == http.StatusAccepted {
					l.add(t, r)
				} else {
					t.Errorf("sendAsync: %d %s", r.Status, r.Error)
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	l.verify(t, h)
}

// testWriter sends log output to t.Log so it shows only for failing tests.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Integration reports whether real-broker tests must run; scripts/test.sh sets MQTARGET_INTEGRATION=1.
func Integration(t testing.TB) {
	t.Helper()
	if os.Getenv("MQTARGET_INTEGRATION") == "" {
		t.Skip("real-broker test: run scripts/test.sh, or set MQTARGET_INTEGRATION=1 with the broker binaries")
	}
}

// warmUp publishes to every host until each takes a message, within a deadline. A first connection
// that missed its deadline on a busy machine (a cold JVM's first TLS handshake took over 2 s in CI)
// leaves its host in backoff, answering 503 at once, and the cases that follow would each fail on it:
// they test delivery, not the first dial (the fault suites do). Requests go in whole rounds of the
// round-robin endpoint, so that the cases start at host 0 as they expect, and warmSlots rounds of them,
// so that every pooled connection of every host (a broker may keep several per host) has been dialled:
// one round opens only one connection per host, and the case after it would dial the next.
func warmUp(t *testing.T, tg *Target, hosts int) {
	t.Helper()
	path := "/send1"
	switch {
	case hosts == 2:
		path = "/send2Host"
	case hosts >= 3:
		path, hosts = "/send3Host", 3
	}
	path += "?topic=" + uniqueTopic("warm")
	end := time.Now().Add(60 * time.Second)
	for {
		var failed []string
		for range hosts * warmSlots {
			if r := tg.Do(t, http.MethodGet, path, nil); r.Status != http.StatusOK {
				failed = append(failed, fmt.Sprintf("%d %s", r.Status, r.Error))
			}
		}
		if len(failed) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("warm-up %s: no round without failures within 60 s; last: %q", path, failed)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// SetEnv returns environment variable name, which an integration run must set (hint says who does);
// it skips the test outside one.
func SetEnv(t testing.TB, name, hint string) string {
	t.Helper()
	Integration(t)
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set (%s)", name, hint)
	}
	return v
}

// checkVersions: GET / names what every host of broker runs, learned from the handshakes or the broker's
// runtime information (the pings at start, or at the latest the first publish). A start ping that did
// not finish within readyz.timeout (a TLS handshake on a busy machine) learned nothing: each try
// asks /readyz first, whose pings connect again.
func checkVersions(t *testing.T, tg *Target, broker string) {
	var last []string
	testwait.Until(t, 10*time.Second, "every host's version on GET /", func() error {
		if resp, err := http.Get(tg.Base + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		req, _ := http.NewRequest(http.MethodGet, tg.Base+"/", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var idx struct {
			Brokers map[string]struct {
				Hosts    []string `json:"hosts"`
				Versions []string `json:"versions"`
			} `json:"brokers"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&idx); err != nil {
			return err
		}
		b := idx.Brokers[broker]
		last = b.Versions
		if len(b.Versions) != len(b.Hosts) || slices.Contains(b.Versions, "") {
			return fmt.Errorf("hosts %v, versions %q", b.Hosts, b.Versions)
		}
		return nil
	})
	t.Logf("%s: %q", broker, last)
}
