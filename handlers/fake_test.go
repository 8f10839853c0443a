package handlers_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/publishers"
)

// Publish modes the fake records.
const (
	modeSync  = "sync"
	modeBatch = "batch"
	modeAsync = "async"
)

// call is one publish the fake received.
type call struct {
	mode   string
	host   int
	topic  string
	bodies [][]byte
}

// asyncBehaviour is how the fake completes PublishAsync.
type asyncBehaviour int

const (
	asyncComplete asyncBehaviour = iota // done(nil) from another goroutine, at once
	asyncHold                           // done is held until release
	asyncFail                           // done(asyncErr) from another goroutine, at once
	asyncRefuse                         // PublishAsync itself returns asyncErr; done is never called
)

// fakePub is a publishers.Publisher that records what it is asked to do.
type fakePub struct {
	hosts []string

	mu       sync.Mutex
	calls    []call
	errFor   func(n int, c call) error // error for the n-th publish call (0-based); nil means success
	async    asyncBehaviour
	asyncErr error
	held     []func(error)
	pingErr  map[int]error
	pings    int           // Ping calls
	pingGate chan struct{} // when set, every Ping waits until it is closed
	// gate, when set, holds every sync publish until it is closed or the publish context ends; ctxErrs
	// records each held publish's context error at the end, so tests see whether the handler cancelled it.
	gate    chan struct{}
	ctxErrs []error
	// syncDeadlines are the deadlines of the sync publishes' contexts, in order.
	syncDeadlines []time.Time

	// asyncBlock is how long PublishAsync blocks before it returns, as a client looking a route up does.
	asyncBlock time.Duration
}

// wait holds a publish at the gate; the error is the context's when it ended first.
func (f *fakePub) wait(ctx context.Context) error {
	if f.gate == nil {
		return nil
	}
	select {
	case <-f.gate:
	case <-ctx.Done():
	}
	f.mu.Lock()
	f.ctxErrs = append(f.ctxErrs, ctx.Err())
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake: %w", err)
	}
	return nil
}

func (f *fakePub) contextErrors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.ctxErrs...)
}

func newFake(nHosts int) *fakePub {
	f := &fakePub{}
	for i := range nHosts {
		f.hosts = append(f.hosts, fmt.Sprintf("h%d:4150", i))
	}
	return f
}

var _ publishers.Publisher = (*fakePub)(nil)

func (f *fakePub) record(c call) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.calls)
	f.calls = append(f.calls, c)
	if f.errFor != nil {
		return f.errFor(n, c)
	}
	return nil
}

func (f *fakePub) Publish(ctx context.Context, host int, topic string, body []byte) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return fmt.Errorf("fake: Publish without a deadline")
	}
	f.mu.Lock()
	f.syncDeadlines = append(f.syncDeadlines, dl)
	f.mu.Unlock()
	if err := f.record(call{modeSync, host, topic, [][]byte{body}}); err != nil {
		return err
	}
	return f.wait(ctx)
}

func (f *fakePub) PublishBatch(ctx context.Context, host int, topic string, bodies [][]byte) error {
	if _, ok := ctx.Deadline(); !ok {
		return fmt.Errorf("fake: PublishBatch without a deadline")
	}
	if err := f.record(call{modeBatch, host, topic, bodies}); err != nil {
		return err
	}
	return f.wait(ctx)
}

func (f *fakePub) PublishAsync(host int, topic string, body []byte, done func(error)) error {
	if err := f.record(call{modeAsync, host, topic, [][]byte{body}}); err != nil {
		return err
	}
	time.Sleep(f.asyncBlock) // the client's own work inside the call, not synchronisation
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.async {
	case asyncHold:
		f.held = append(f.held, done)
	case asyncFail:
		go done(f.asyncErr)
	case asyncRefuse:
		return f.asyncErr
	default:
		go done(nil)
	}
	return nil
}

// release completes every held async publish with err and reports how many there were.
func (f *fakePub) release(err error) int {
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.mu.Unlock()
	for _, done := range held {
		done(err)
	}
	return len(held)
}

func (f *fakePub) heldCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held)
}

func (f *fakePub) Hosts() []string { return f.hosts }

func (f *fakePub) Ping(_ context.Context, host int) error {
	f.mu.Lock()
	f.pings++
	gate := f.pingGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pingErr[host]
}

func (f *fakePub) pingCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pings
}

func (f *fakePub) ValidateTopic(name string) error {
	if !nsq.IsValidTopicName(name) {
		return fmt.Errorf("%q is not a valid topic", name)
	}
	return nil
}

func (f *fakePub) Close() error { return nil }

func (f *fakePub) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// sortedCalls orders calls by topic then mode, for handlers that publish concurrently.
func sortedCalls(cs []call) []call {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].topic < cs[j].topic })
	return cs
}

func (f *fakePub) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// Test server defaults.
const (
	defTopic   = "load"
	defTopic2  = "load2"
	defSize    = 100
	defMaxSize = 1000
)

type testServer struct {
	srv *handlers.Server
	pub *fakePub
	reg *prometheus.Registry
}

func newServer(t *testing.T, pub *fakePub, mods ...func(*handlers.Options)) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := handlers.Options{
		Publishers:     map[string]publishers.Publisher{"nsq": pub},
		DefaultBroker:  "nsq",
		Topic:          defTopic,
		Topic2:         defTopic2,
		MessageSize:    defSize,
		MaxMessageSize: defMaxSize,
		PublishTimeout: 2 * time.Second,
		AsyncLimit:     100,
		Registry:       reg,
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Setup:          map[string]any{"nsq": map[string]any{"embedded": false}},
	}
	for _, m := range mods {
		m(&o)
	}
	return &testServer{srv: handlers.New(o), pub: pub, reg: reg}
}

// do serves one request; body "" means no body.
func (ts *testServer) do(method, target, body string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
	}
	w := httptest.NewRecorder()
	ts.srv.ServeHTTP(w, r)
	return w
}
