package rocketmq

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq/admin"
)

// rmqServeOK answers every request with SUCCESS; rmqAnswerOneThenClose the first only.
func rmqServe(answerOne bool) func(net.Conn) {
	return func(c net.Conn) {
		for {
			q, err := readRMQTestRequest(c)
			if err != nil {
				return
			}
			if _, err := c.Write(rmqTestResponse(0, q.opaque, "", false)); err != nil || answerOne {
				return
			}
		}
	}
}

// newRMQNativeTo is a native RocketMQ publisher for one broker at addr and the name server ns, with
// publishertest.ShortBackoff and the logger New would make of log.
func newRMQNativeTo(ns, addr string, log *slog.Logger) *Native {
	c := DefaultConfig()
	c.NameServers = []string{ns}
	c.SendTimeout = 200 * time.Millisecond
	p := &Native{Publisher: &Publisher{cfg: c, log: publishers.LimitLog(log), closing: make(chan struct{}), admin: &admin.Client{},
		brokers: []admin.Broker{{Name: "broker-a", Addr: addr}}, queues: make([]atomic.Uint32, 1)}}
	p.native = newRMQNative(p.Publisher)
	p.native.backoff = publishertest.ShortBackoff
	return p
}

// TestRedialBounded: publishertest.RunRedialBounded against the native send path.
func TestRedialBounded(t *testing.T) {
	pub := func(t *testing.T, addr string, log *slog.Logger) publishertest.Redialer {
		p := newRMQNativeTo("127.0.0.1:1", addr, log)
		r := &rmqRoute{ready: make(chan struct{}), queues: []int{4}}
		r.at.Store(time.Now().UnixNano())
		close(r.ready)
		p.native.routes.Store("t", r)
		return p
	}
	publishertest.RunRedialBounded(t, []publishertest.RedialCase{
		{Name: "closes at once", Pub: pub, Serve: func(net.Conn) {}, Good: rmqServe(false), Slots: 1, Answered: false, Probes: 0},
		{Name: "answers one and closes", Pub: pub, Serve: rmqServe(true), Good: rmqServe(false), Slots: 1, Answered: true, Probes: 0},
		{Name: "refuses", Pub: pub, Serve: nil, Good: nil, Slots: 1, Answered: false, Probes: 0},
	})
}

// TestPingBounded: publishertest.RunPingBounded against the native send path.
func TestPingBounded(t *testing.T) {
	publishertest.RunPingBounded(t, []publishertest.PingCase{
		{Name: "rocketmq native", Serve: rmqServe(false), Pub: func(t *testing.T, addr string) publishertest.Pinger {
			return newRMQNativeTo("127.0.0.1:1", addr, slog.New(slog.DiscardHandler))
		}, Pool: false},
	})
}

// TestRMQRouteRedial: a name server that drops every connection, or one that never answers, is asked
// for a topic's route under the redial policy, not once per publish: also when every publish's deadline
// (5 ms) ends before a fetch (send_timeout 200 ms) could.
func TestRMQRouteRedial(t *testing.T) {
	for _, tc := range []struct {
		name     string
		serve    func(net.Conn)
		deadline time.Duration
	}{
		{"drops every connection", func(net.Conn) {}, 200 * time.Millisecond},
		{"never answers, publishes with short deadlines", func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := publishertest.StartFlapServer(t, tc.serve, nil)
			broker := publishertest.StartFlapServer(t, rmqServe(false), nil)
			p := newRMQNativeTo(ns.Addr(), broker.Addr(), slog.New(slog.DiscardHandler))
			defer p.Close()
			elapsed := publishertest.Hammer(4, 500*time.Millisecond, func() {
				ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
				if err := p.Publish(ctx, 0, "t", []byte("m")); err == nil {
					t.Error("published without a route")
				}
				cancel()
			})
			dials := ns.Accepted.Load()
			bound := publishertest.MaxDials(publishertest.ShortBackoff, elapsed, 1, false)
			t.Logf("%d name server connections in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
			if dials > int64(bound) {
				t.Errorf("%d name server connections in %v, want at most %d under the backoff", dials, elapsed.Round(time.Millisecond), bound)
			}
		})
	}
}

// TestRMQConsumerRedial: a consumer whose name server drops every connection retries its rounds
// under the redial policy, not every 200 ms.
func TestRMQConsumerRedial(t *testing.T) {
	ns := publishertest.StartFlapServer(t, func(net.Conn) {}, nil)
	broker := publishertest.StartFlapServer(t, func(net.Conn) {}, nil)
	c := DefaultConfig()
	c.NameServers = []string{ns.Addr()}
	r := &Consumer{cfg: c, log: slog.New(slog.DiscardHandler), admin: &admin.Client{}, scope: publishers.NewScope(),
		brokers: []admin.Broker{{Name: "broker-a", Addr: broker.Addr()}}}
	r.backoff = publishers.DefaultBackoff()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.pullBroker(ctx, 0, r.brokers[0], "t", func(publishers.Delivery) {})
	elapsed := time.Since(start)
	dials := ns.Accepted.Load() + broker.Accepted.Load()
	bound := publishertest.MaxDials(publishers.DefaultBackoff(), elapsed, 1, false)
	t.Logf("%d connections in %v (bound %d)", dials, elapsed.Round(time.Millisecond), bound)
	if dials > int64(bound) {
		t.Errorf("%d connections in %v, want at most %d under the backoff", dials, elapsed.Round(time.Millisecond), bound)
	}
}
