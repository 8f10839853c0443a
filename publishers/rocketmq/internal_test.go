package rocketmq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

func TestRocketMQConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate("rocketmq"); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c := DefaultConfig()
	c.NameServers = []string{"127.0.0.1:9876", "namesrv"}
	c.Group = "bad group"
	c.SendTimeout = 0
	c.Retries = -1
	c.AccessKey = "ak"
	c.Queues = 0
	c.Producers = 65
	err := c.Validate("rocketmq")
	for _, field := range []string{"rocketmq.name_servers[1]", "rocketmq.group", "rocketmq.send_timeout", "rocketmq.retries",
		"rocketmq.access_key", "rocketmq.queues", "rocketmq.producers"} {
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	if strings.Contains(fmt.Sprint(err), "rocketmq.name_servers[0]") {
		t.Errorf("valid name server reported: %v", err)
	}
}

func TestValidateRocketMQTopic(t *testing.T) {
	for _, ok := range []string{"a", "mqtarget", "it-0a1b_C", "%ns%topic", strings.Repeat("t", 127)} {
		if err := ValidateTopic(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a.b", "a/b", "ä", strings.Repeat("t", 128), "TBW102", "RMQ_SYS_TRACE_TOPIC",
		"rmq_sys_x", "%RETRY%g", "%DLQ%g", "SCHEDULE_TOPIC_XXXX"} {
		if err := ValidateTopic(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRocketMQResult checks how the client's outcomes map onto the error kinds (and so status codes).
func TestRocketMQResult(t *testing.T) {
	p := &Publisher{}
	bg := context.Background()
	expired, cancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel()
	canceled, cancel2 := context.WithCancel(bg)
	cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		res  *primitive.SendResult
		err  error
		want error
	}{
		{"ok", bg, &primitive.SendResult{Status: primitive.SendOK}, nil, nil},
		{"flush timeout", bg, &primitive.SendResult{Status: primitive.SendFlushDiskTimeout}, nil, publishers.ErrTimeout},
		{"unknown status", bg, &primitive.SendResult{Status: primitive.SendUnknownError}, nil, publishers.ErrRejected},
		{"request timeout", bg, nil, rmqerrors.ErrRequestTimeout, publishers.ErrTimeout},
		{"deadline passed", expired, nil, errors.New("anything"), publishers.ErrTimeout},
		{"canceled", canceled, nil, errors.New("anything"), context.Canceled},
		{"not running", bg, nil, rmqerrors.ErrNotRunning, publishers.ErrClosed},
		{"connection refused", bg, nil, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, publishers.ErrUnavailable},
		{"no route", bg, nil, errors.New("the topic=x route info not found"), publishers.ErrUnavailable},
		{"system busy", bg, nil, errors.New("CODE: 2, DESC: [PCBUSY_CLEAN_QUEUE]broker busy"), publishers.ErrUnavailable},
		{"no permission", bg, nil, errors.New("CODE: 16, DESC: no permission"), publishers.ErrRejected},
		{"topic not exist", bg, nil, errors.New("CODE: 17, DESC: topic not exist"), publishers.ErrRejected},
	} {
		got := p.result(c.ctx, c.res, c.err)
		if (c.want == nil) != (got == nil) || (c.want != nil && !errors.Is(got, c.want)) {
			t.Errorf("%s: got %v, want kind %v", c.name, got, c.want)
		}
	}
}

// TestRMQNotDurable: FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE and FLUSH_SLAVE_TIMEOUT mean the broker
// stored the message but did not flush or replicate it in time: both paths answer 504 (unknown
// outcome) saying so, not 502 (refused), and neither resends it.
func TestRMQNotDurable(t *testing.T) {
	p := &Publisher{}
	n := &rmqNative{}
	for _, tc := range []struct {
		name   string
		code   int
		status primitive.SendStatus
	}{
		{"FLUSH_DISK_TIMEOUT", 10, primitive.SendFlushDiskTimeout},
		{"SLAVE_NOT_AVAILABLE", 11, primitive.SendSlaveNotAvailable},
		{"FLUSH_SLAVE_TIMEOUT", 12, primitive.SendFlushSlaveTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			codeErr := fmt.Errorf("CODE: %d, DESC: x", tc.code)
			for path, got := range map[string]error{
				"native":         n.result(&admin.CodeError{Code: tc.code, Remark: "x"}),
				"library status": p.result(context.Background(), &primitive.SendResult{Status: tc.status}, nil),
				"library code":   p.result(context.Background(), nil, codeErr),
			} {
				if !errors.Is(got, publishers.ErrTimeout) || errors.Is(got, publishers.ErrRejected) {
					t.Errorf("%s: %v, want kind ErrTimeout", path, got)
				}
				if got != nil && !strings.Contains(got.Error(), "not durable in time") {
					t.Errorf("%s: %q does not say the message was acknowledged as not durable in time", path, got)
				}
			}
			if rmqNativeNotStored(&admin.CodeError{Code: tc.code}) || rmqNotStored(codeErr) {
				t.Errorf("code %d would be resent: the broker stored the message", tc.code)
			}
		})
	}
}

// TestRocketMQNotStored: only failures that certainly stored nothing are resent; a timeout never is, the
// broker may hold the message already (issue #9, defect 8).
func TestRocketMQNotStored(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"request timeout", rmqerrors.ErrRequestTimeout, false},
		{"deadline", context.DeadlineExceeded, false},
		{"canceled", context.Canceled, false},
		{"read broke", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, false},
		{"dial refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"write failed", fmt.Errorf("send: %w", &net.OpError{Op: "write", Err: errors.New("broken pipe")}), true},
		{"no route", errors.New("the topic=x route info not found"), true},
		{"system error (may follow a put)", errors.New("CODE: 1, DESC: error"), false},
		{"service not available", errors.New("CODE: 14, DESC: store not available"), true},
		{"no permission", errors.New("CODE: 16, DESC: no permission"), true},
		{"topic not exist", errors.New("CODE: 17, DESC: topic not exist"), true},
		{"message illegal", errors.New("CODE: 13, DESC: too big"), false},
		{"not running", rmqerrors.ErrNotRunning, false},
	} {
		if got := rmqNotStored(c.err); got != c.want {
			t.Errorf("%s: resend = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRocketMQLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := routeRlog(log)
	defer rlogTarget.CompareAndSwap(l, nil)
	a := rlogAdapter{}
	a.Error("conn error", map[string]interface{}{"addr": "127.0.0.1:10911"})
	a.Fatal("fatal", nil)
	a.Warning("retrying", nil)
	a.Info("route changed", nil)
	out := buf.String()
	for _, want := range []string{`level=WARN msg="conn error"`, "addr=127.0.0.1:10911", `level=WARN msg=fatal`,
		`level=INFO msg=retrying`, `level=DEBUG msg="route changed"`, "component=rocketmq-client"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("client log above warn:\n%s", out)
	}
}

// TestNewRocketMQNameServerDown: no name server answering fails the start at once, naming the setting.
func TestNewRocketMQNameServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := DefaultConfig()
	c.NameServers = []string{addr}
	start := time.Now()
	p, err := New(c, nil, slog.New(slog.DiscardHandler))
	if err == nil {
		p.Close()
		t.Fatal("started without a name server")
	}
	if !strings.Contains(err.Error(), "rocketmq.name_servers") || !strings.Contains(err.Error(), addr) {
		t.Errorf("error does not name rocketmq.name_servers and %s: %v", addr, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if rlogTarget.Load() != nil {
		t.Error("the client's log is still routed to the failed publisher's logger")
	}
}

// TestRMQRemotingClients checks that the unexported connection pools Close shuts down are found in the
// pinned rocketmq-client-go (a producer connects nowhere before Start).
func TestRMQRemotingClients(t *testing.T) {
	prod, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:9"})))
	if err != nil {
		t.Fatal(err)
	}
	conns, err := rmqRemotingClients(prod)
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || conns[0] == conns[1] {
		t.Fatalf("got %v, want the name server and the broker pools", conns)
	}
	for _, c := range conns {
		c.ShutDown() // nothing to close yet; must not panic
	}
}

// TestRMQRouteHolder: the pinned rocketmq-client-go's producer tells whether it holds a topic's route;
// without it PublishAsync would take every send as routed, and wait for the name server on its
// caller's goroutine when it is not.
func TestRMQRouteHolder(t *testing.T) {
	prod, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:9"})))
	if err != nil {
		t.Fatal(err)
	}
	h, ok := prod.(rmqRouteHolder)
	if !ok {
		t.Fatalf("%T does not tell whether it holds a topic's route", prod)
	}
	if pr := (&rmqProducer{p: prod, routes: h}); pr.routed("t") {
		t.Error("a producer that never sent holds the route of t")
	}
}

// TestRMQLabelled checks the goroutine profile parsing that Close waits on.
func TestRMQLabelled(t *testing.T) {
	const label = "rmq-labelled-test"
	stop := make(chan struct{})
	started := make(chan struct{})
	pprof.Do(context.Background(), pprof.Labels(rmqGoroutineLabel, label), func(context.Context) {
		for range 3 {
			go func() { started <- struct{}{}; <-stop }()
		}
	})
	for range 3 {
		<-started
	}
	if n := rmqLabelled(label, nil); n != 3 {
		t.Errorf("%d goroutines labelled, want 3", n)
	}
	if n := rmqLabelled(label, []string{"github.com/mqtarget/mqtarget/publishers/rocketmq.TestRMQLabelled.func1.1"}); n != 0 {
		t.Errorf("%d goroutines labelled outside the allowed function, want 0", n)
	}
	if n := rmqLabelled("other", nil); n != 0 {
		t.Errorf("%d goroutines with another label, want 0", n)
	}
	close(stop)
	if err := rmqWaitGoroutines(label, 5*time.Second); err != nil {
		t.Error(err)
	}
}

// fakeRMQProducer holds the callbacks of SendAsync, so a test plays the client's late answers.
type fakeRMQProducer struct {
	rocketmq.Producer // not called
	mu                sync.Mutex
	callbacks         []func(context.Context, *primitive.SendResult, error)
	sent              chan struct{}
	shutdowns         atomic.Int32
}

func (f *fakeRMQProducer) SendAsync(_ context.Context, cb func(context.Context, *primitive.SendResult, error), _ ...*primitive.Message) error {
	f.mu.Lock()
	f.callbacks = append(f.callbacks, cb)
	f.mu.Unlock()
	f.sent <- struct{}{}
	return nil
}

func (f *fakeRMQProducer) Shutdown() error {
	f.shutdowns.Add(1)
	return nil
}

// TestRocketMQClosePending: Close fails every publish the client still holds with ErrClosed, exactly
// once (the client's late callbacks are dropped), ends a blocked Publish, and shuts the client down once.
func TestRocketMQClosePending(t *testing.T) {
	fake := &fakeRMQProducer{sent: make(chan struct{}, 16)}
	cfg := DefaultConfig()
	// Close waits up to send_timeout+1s for the client's callbacks, which this fake gives only after
	// it; the blocked Publish must still be waiting when Close comes, on a CI machine too (at 10 ms
	// it timed out first there).
	cfg.SendTimeout = time.Second
	p := &Publisher{
		cfg:      cfg,
		brokers:  []admin.Broker{{Name: "broker-a", Addr: "127.0.0.1:9"}},
		targets:  []*primitive.MessageQueue{{BrokerName: "broker-a"}},
		queues:   make([]atomic.Uint32, 1),
		log:      slog.New(slog.DiscardHandler),
		pending:  map[*rmqPending]struct{}{},
		closing:  make(chan struct{}),
		handoffs: publishers.NewScope(),
		handSlot: make(chan struct{}, rmqMaxHandoffs),
	}
	s := &rmqSlot{}
	s.cur.Store(&rmqProducer{p: fake, label: "rocketmq-close-pending-test"})
	p.slots = []*rmqSlot{s}

	var mu sync.Mutex
	dones := map[int][]error{}
	publishAsync := func(i int) {
		t.Helper()
		if err := p.PublishAsync(0, "t", []byte("x"), func(err error) {
			mu.Lock()
			dones[i] = append(dones[i], err)
			mu.Unlock()
		}); err != nil {
			t.Fatalf("PublishAsync %d: %v", i, err)
		}
		<-fake.sent
	}
	// answered before Close: done(nil)
	publishAsync(0)
	fake.callbacks[0](context.Background(), &primitive.SendResult{Status: primitive.SendOK}, nil)
	// pending at Close
	for i := 1; i <= 3; i++ {
		publishAsync(i)
	}
	syncErr := make(chan error, 1)
	go func() { syncErr <- p.Publish(context.Background(), 0, "t", []byte("sync")) }()
	<-fake.sent

	closed := make(chan error, 2)
	go func() { closed <- p.Close() }()
	go func() { closed <- p.Close() }()
	for range 2 {
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := <-syncErr; !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("Publish pending at Close: %v, want publishers.ErrClosed", err)
	}
	// the client's late answers
	for _, cb := range fake.callbacks[1:] {
		cb(context.Background(), &primitive.SendResult{Status: primitive.SendOK}, nil)
	}
	mu.Lock()
	if len(dones[0]) != 1 || dones[0][0] != nil {
		t.Errorf("publish answered before Close: done(%v), want done(nil) once", dones[0])
	}
	for i := 1; i <= 3; i++ {
		if len(dones[i]) != 1 || !errors.Is(dones[i][0], publishers.ErrClosed) {
			t.Errorf("publish %d pending at Close: done(%v), want done(publishers.ErrClosed) once", i, dones[i])
		}
	}
	mu.Unlock()
	if n := fake.shutdowns.Load(); n != 1 {
		t.Errorf("client shut down %d times, want 1", n)
	}
	if err := p.PublishAsync(0, "t", []byte("x"), func(error) { t.Error("done of a refused PublishAsync ran") }); !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("PublishAsync after Close: %v, want publishers.ErrClosed", err)
	}
	if err := p.Publish(context.Background(), 0, "t", []byte("x")); !errors.Is(err, publishers.ErrClosed) {
		t.Errorf("Publish after Close: %v, want publishers.ErrClosed", err)
	}
}
