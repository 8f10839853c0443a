package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/publishers"
)

type readyHost struct {
	Host  string `json:"host"`
	State string `json:"state"`
	Error string `json:"error"`
}

type readyBroker struct {
	Required bool        `json:"required"`
	Ready    bool        `json:"ready"`
	Hosts    []readyHost `json:"hosts"`
}

type readyBody struct {
	Ready   bool                   `json:"ready"`
	Brokers map[string]readyBroker `json:"brokers"`
}

func readyz(t *testing.T, ts *testServer) (int, readyBody) {
	t.Helper()
	w := ts.do(http.MethodGet, "/readyz", "")
	var r readyBody
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return w.Code, r
}

// twoBrokers serves nsq (the default) and stomp, each a fake with its ping errors.
func twoBrokers(nsqErr, stompErr map[int]error, ready []string) (*fakePub, *fakePub, func(*handlers.Options)) {
	nsqPub, stompPub := newFake(2), newFake(2)
	nsqPub.pingErr, stompPub.pingErr = nsqErr, stompErr
	return nsqPub, stompPub, func(o *handlers.Options) {
		o.Publishers = map[string]publishers.Publisher{"nsq": nsqPub, "stomp": stompPub}
		o.ReadyBrokers = ready
	}
}

func TestReadyzPerBroker(t *testing.T) {
	down := map[int]error{1: errors.New("dial tcp h1:4150: connection refused")}
	for _, tc := range []struct {
		name       string
		nsqErr     map[int]error
		stompErr   map[int]error
		ready      []string // Options.ReadyBrokers
		status     int
		required   map[string]bool
		brokerDown map[string]bool
	}{
		{"all up", nil, nil, nil, 200, map[string]bool{"nsq": true}, nil},
		{"default broker host down", down, nil, nil, 503, map[string]bool{"nsq": true}, map[string]bool{"nsq": true}},
		{"other broker down does not fail by default", nil, down, nil, 200, map[string]bool{"nsq": true}, map[string]bool{"stomp": true}},
		{"other broker down fails when listed", nil, down, []string{"nsq", "stomp"}, 503,
			map[string]bool{"nsq": true, "stomp": true}, map[string]bool{"stomp": true}},
		{"default broker down ignored when not listed", down, nil, []string{"stomp"}, 200,
			map[string]bool{"stomp": true}, map[string]bool{"nsq": true}},
		{"no broker required", down, down, []string{}, 200, map[string]bool{}, map[string]bool{"nsq": true, "stomp": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nsqPub, _, mod := twoBrokers(tc.nsqErr, tc.stompErr, tc.ready)
			status, r := readyz(t, newServer(t, nsqPub, mod))
			if status != tc.status || r.Ready != (tc.status == 200) {
				t.Fatalf("status %d ready %v, want %d", status, r.Ready, tc.status)
			}
			if len(r.Brokers) != 2 {
				t.Fatalf("brokers %+v, want nsq and stomp", r.Brokers)
			}
			for name, b := range r.Brokers {
				if b.Required != tc.required[name] {
					t.Errorf("%s required = %v, want %v", name, b.Required, tc.required[name])
				}
				if b.Ready == tc.brokerDown[name] {
					t.Errorf("%s ready = %v", name, b.Ready)
				}
				if len(b.Hosts) != 2 {
					t.Fatalf("%s hosts %+v, want 2", name, b.Hosts)
				}
				for i, h := range b.Hosts {
					wantDown := tc.brokerDown[name] && i == 1
					if h.Host != nsqPub.hosts[i] || (h.State == "down") != wantDown || (h.State != "up" && h.State != "down") {
						t.Errorf("%s host %d = %+v, down=%v", name, i, h, wantDown)
					}
					if wantDown && !strings.Contains(h.Error, "connection refused") {
						t.Errorf("%s host %d error %q", name, i, h.Error)
					}
				}
			}
		})
	}
}

// hangingPub answers no ping until the ping's context ends, like a broker that accepts the TCP
// connection and then says nothing.
type hangingPub struct{ *fakePub }

func (hangingPub) Ping(ctx context.Context, _ int) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestReadyzDeadline: a hanging broker makes /readyz answer 503 when its timeout ends, not hang with it.
func TestReadyzDeadline(t *testing.T) {
	ts := newServer(t, newFake(1), func(o *handlers.Options) {
		o.Publishers = map[string]publishers.Publisher{"nsq": hangingPub{newFake(3)}}
		o.ReadyTimeout = 50 * time.Millisecond
	})
	status, r := readyz(t, ts)
	if status != http.StatusServiceUnavailable || len(r.Brokers["nsq"].Hosts) != 3 {
		t.Fatalf("status %d, %+v", status, r)
	}
	for _, h := range r.Brokers["nsq"].Hosts {
		if h.State != "down" || !strings.Contains(h.Error, "deadline") {
			t.Errorf("host %+v, want down by the deadline", h)
		}
	}
}

// syncBuffer is a log destination safe for concurrent handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.FieldsFunc(b.buf.String(), func(r rune) bool { return r == '\n' })
}

// TestReadyzLogsStateChanges: a host going down and coming back is logged once each, however many
// probes see it so; a host that stays up is never logged.
func TestReadyzLogsStateChanges(t *testing.T) {
	var logs syncBuffer
	pub := newFake(2)
	ts := newServer(t, pub, func(o *handlers.Options) { o.Log = slog.New(slog.NewTextHandler(&logs, nil)) })
	setPing := func(err error) {
		pub.mu.Lock()
		pub.pingErr = map[int]error{1: err}
		pub.mu.Unlock()
	}
	probe := func(n int) {
		var wg sync.WaitGroup
		for range n { // concurrently, as several probes do
			wg.Go(func() { ts.do(http.MethodGet, "/readyz", "") })
		}
		wg.Wait()
	}
	probe(3)
	setPing(errors.New("connection refused"))
	probe(5)
	setPing(nil)
	probe(5)
	got := logs.lines()
	if len(got) != 2 {
		t.Fatalf("logged %d lines, want 2 (down, up):\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, want := range []string{"level=WARN msg=\"broker host unreachable\" broker=nsq host=" + pub.hosts[1],
		"level=INFO msg=\"broker host reachable again\" broker=nsq host=" + pub.hosts[1]} {
		if !strings.Contains(got[i], want) {
			t.Errorf("line %d %q lacks %q", i, got[i], want)
		}
	}
	if !strings.Contains(got[0], "connection refused") {
		t.Errorf("down line %q lacks the error", got[0])
	}
}

// A host that flaps between every probe logs its first down and first up line, then at most one of
// each per lograte.Interval: the probes and the broker drive these lines, not an operator.
func TestReadyzFlappingHostLogsAFewLines(t *testing.T) {
	var logs syncBuffer
	pub := newFake(2)
	ts := newServer(t, pub, func(o *handlers.Options) { o.Log = slog.New(slog.NewTextHandler(&logs, nil)) })
	for i := range 100 {
		var err error
		if i%2 == 0 {
			err = errors.New("connection refused")
		}
		pub.mu.Lock()
		pub.pingErr = map[int]error{1: err}
		pub.mu.Unlock()
		ts.do(http.MethodGet, "/readyz", "")
	}
	if got := logs.lines(); len(got) != 2 {
		t.Fatalf("100 flips logged %d lines, want 2 (the first down, the first up):\n%s", len(got), strings.Join(got, "\n"))
	}
}
