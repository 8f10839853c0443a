package roundtrip_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// TestMain fails on any goroutine of ours left running. The ignored ones are libraries': go-stomp's
// server keeps its request processor after the listener closes, and a cache of the RocketMQ client
// starts a janitor at package init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/go-stomp/stomp/v3/server.(*requestProcessor).Serve"),
		goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}

// broker is an embedded broker with two hosts: a publisher and a way to open consumers.
type broker struct {
	name     string
	pub      publishers.Publisher
	consumer func(t *testing.T, group string) publishers.Consumer
}

var quiet = slog.New(slog.DiscardHandler)

func embeddedNSQ(t *testing.T) broker {
	cfg, pub := itest.EmbeddedNSQ(t, 2)
	return nsqBroker(cfg, pub)
}

// nsqBroker opens NSQ consumers of cfg's hosts beside pub.
func nsqBroker(cfg nsq.Config, pub publishers.Publisher) broker {
	return broker{name: "nsq", pub: pub, consumer: func(t *testing.T, group string) publishers.Consumer {
		c, err := nsq.NewConsumer(cfg, publishers.ConsumerOptions{Group: group}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}}
}

func embeddedSTOMP(t *testing.T) broker {
	srv, err := stomp.StartServer(2, 1<<20, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cfg := stomp.DefaultConfig()
	cfg.Hosts = srv.Addrs()
	pub, err := stomp.New(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return broker{name: "stomp", pub: pub, consumer: func(t *testing.T, _ string) publishers.Consumer {
		c, err := stomp.NewConsumer(cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}}
}

// realNSQ runs two nsqd processes from MQTARGET_NSQD_BIN (scripts/nsqd.sh build), on free ports; the
// case is skipped without it.
func realNSQ(t *testing.T) broker {
	bin := os.Getenv("MQTARGET_NSQD_BIN")
	if bin == "" {
		t.Skip("MQTARGET_NSQD_BIN not set (scripts/nsqd.sh build prints it)")
	}
	h := itest.NewNSQProcs(t, bin, 2)
	cfg := nsq.DefaultConfig()
	cfg.Hosts = h.TCP
	pub, err := nsq.New(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return nsqBroker(cfg, pub)
}

var brokers = []struct {
	name  string
	start func(t *testing.T) broker
}{{"nsq", embeddedNSQ}, {"stomp", embeddedSTOMP}, {"real nsqd", realNSQ}}

// batch sends n messages over the hosts, all expected before the first wait, and waits for every ack
// until the deadline, or for a second when doomed says the id's ack is not coming; it returns the
// correlator's counts and how many waits failed.
func batch(t *testing.T, b broker, corr *roundtrip.Correlator, topic string, n int, deadline time.Duration, doomed func(id string) bool) (roundtrip.Stats, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	src := message.NewSource()
	hosts := len(b.pub.Hosts())
	pending := make([]*roundtrip.Pending, n)
	ids := make([]string, n)
	for i := range n {
		body := src.Build(src.NextID(), 64)
		ids[i], _, _ = message.Parse(body)
		pending[i] = corr.Expect(ids[i])
		if err := b.pub.Publish(ctx, i%hosts, topic, body); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	failed := 0
	for i, p := range pending {
		wctx := ctx
		if doomed != nil && doomed(ids[i]) {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, time.Second)
			defer cancel()
		}
		a, err := p.Wait(wctx)
		switch {
		case errors.Is(err, roundtrip.ErrLost):
			failed++
		case err != nil:
			t.Fatal(err)
		case a.RTT <= 0 || a.Received.Before(a.Sent):
			t.Errorf("ack %s: rtt %v", a.ID, a.RTT)
		}
	}
	return corr.Stats(), failed
}

// TestEchoAccounting: every message comes back exactly once, through both handoffs; an echo that drops
// one id makes lost = 1, one that sends an id twice makes duplicates = 1.
func TestEchoAccounting(t *testing.T) {
	const n = 300
	cases := []struct {
		name    string
		handoff roundtrip.Handoff
		workers int
		copies  func(id, victim string) int
		want    roundtrip.Stats
	}{
		{name: "queue exact", handoff: roundtrip.Queue, workers: 4, want: roundtrip.Stats{Acked: n}},
		{name: "direct exact", handoff: roundtrip.Direct, workers: 2, want: roundtrip.Stats{Acked: n}},
		{name: "direct one worker", handoff: roundtrip.Direct, workers: 1, want: roundtrip.Stats{Acked: n}},
		{name: "skip one", handoff: roundtrip.Queue, workers: 4, want: roundtrip.Stats{Acked: n - 1, Lost: 1},
			copies: func(id, victim string) int { return map[bool]int{true: 0, false: 1}[id == victim] }},
		{name: "send one twice", handoff: roundtrip.Direct, workers: 4, want: roundtrip.Stats{Acked: n, Duplicates: 1},
			copies: func(id, victim string) int { return map[bool]int{true: 2, false: 1}[id == victim] }},
	}
	for _, bk := range brokers {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.start(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					topic := itest.FreshTopic("echo")
					reg := prometheus.NewPedanticRegistry()
					m := roundtrip.NewMetrics(reg)
					var victim atomic.Value // the 10th id the echo sees
					var seen atomic.Int64
					o := roundtrip.EchoOptions{Broker: b.name, Consumer: b.consumer(t, "mqtarget-echo"), Publisher: b.pub,
						Topics: []string{topic}, Handoff: c.handoff, Workers: c.workers, Timeout: 5 * time.Second, Metrics: m, Log: quiet}
					if c.copies != nil {
						roundtrip.SetCopies(&o, func(id string, _ int) int {
							if seen.Add(1) == 10 {
								victim.Store(id)
							}
							v, _ := victim.Load().(string)
							return c.copies(id, v)
						})
					}
					echo, err := roundtrip.StartEcho(o)
					if err != nil {
						t.Fatal(err)
					}
					defer echo.Close()
					corr := roundtrip.NewCorrelator(b.name, time.Minute, m)
					client := roundtrip.NewClient(b.pub, b.consumer(t, "mqtarget-roundtrip"), []string{topic}, "", corr, quiet)
					defer client.Close()

					doomed := func(id string) bool { v, _ := victim.Load().(string); return c.want.Lost > 0 && id == v }
					got, failed := batch(t, b, corr, topic, n, 30*time.Second, doomed)
					if c.want.Duplicates > 0 { // the second copy may trail its first
						testwait.Until(t, 10*time.Second, "the duplicate ack", func() error {
							if corr.Stats().Duplicates == 0 {
								return errors.New("none yet")
							}
							return nil
						})
						got = corr.Stats()
					}
					got.OutOfOrder = 0 // depends on scheduling across two hosts and the workers
					if got != c.want || failed != int(c.want.Lost) {
						t.Errorf("stats %+v with %d failed waits, want %+v", got, failed, c.want)
					}
					metrics := gather(t, reg)
					for name, want := range map[string]float64{
						"mqtarget_roundtrip_lost_total":       float64(c.want.Lost),
						"mqtarget_roundtrip_duplicates_total": float64(c.want.Duplicates),
						"mqtarget_roundtrip_seconds":          float64(c.want.Acked),
						"mqtarget_echo_latency_seconds":       n,
					} {
						if metrics[name] != want {
							t.Errorf("%s = %v, want %v", name, metrics[name], want)
						}
					}
				})
			}
		})
	}
}

// TestClientRoundTrip: RoundTrip answers with the ack; without an echo it ends lost at the deadline;
// a topic it does not consume acks for is refused before anything is published.
func TestClientRoundTrip(t *testing.T) {
	for _, bk := range brokers {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.start(t)
			topic, silent := itest.FreshTopic("rt"), itest.FreshTopic("silent")
			echo, err := roundtrip.StartEcho(roundtrip.EchoOptions{Broker: b.name, Consumer: b.consumer(t, "mqtarget-echo"), Publisher: b.pub,
				Topics: []string{topic}, Handoff: roundtrip.Queue, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer echo.Close()
			corr := roundtrip.NewCorrelator(b.name, time.Minute, nil)
			client := roundtrip.NewClient(b.pub, b.consumer(t, "mqtarget-roundtrip"), []string{topic, silent}, "", corr, quiet)
			defer client.Close()
			src := message.NewSource()

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			body := src.Build(src.NextID(), 100)
			a, err := client.RoundTrip(ctx, 1, topic, body)
			if err != nil {
				t.Fatal(err)
			}
			if id, _, _ := message.Parse(body); a.ID != id || a.RTT <= 0 {
				t.Errorf("ack %+v for id %s", a, id)
			}

			// The lost round trip's deadline covers its publish too: host 0's connection is made here
			// first, so a slow first dial under load (CI saw one) cannot turn the loss into a publish
			// timeout.
			if err := b.pub.Publish(ctx, 0, itest.FreshTopic("warm"), []byte("warm")); err != nil {
				t.Fatal(err)
			}
			short, cancel2 := context.WithTimeout(context.Background(), time.Second)
			defer cancel2()
			if _, err := client.RoundTrip(short, 0, silent, src.Build(src.NextID(), 100)); !errors.Is(err, roundtrip.ErrLost) {
				t.Errorf("round trip without echo: %v, want roundtrip.ErrLost", err)
			}
			if _, err := client.RoundTrip(ctx, 0, "other", src.Build(src.NextID(), 100)); !errors.Is(err, roundtrip.ErrTopic) {
				t.Errorf("unknown topic: %v, want roundtrip.ErrTopic", err)
			}
			if s := corr.Stats(); s.Acked != 1 || s.Lost != 1 || s.Duplicates != 0 {
				t.Errorf("stats %+v, want 1 acked and 1 lost", s)
			}
		})
	}
}

func TestCorrelatorOrder(t *testing.T) {
	corr := roundtrip.NewCorrelator("x", time.Minute, nil)
	now := time.Now()
	ids := []uint64{1<<40 | 1, 1<<40 | 2, 1<<40 | 3}
	var ps []*roundtrip.Pending
	for _, id := range ids {
		ps = append(ps, corr.Expect(message.FormatID(id)))
	}
	for _, i := range []int{0, 2, 1} { // 2 arrives after 3
		corr.Handle(publishers.Delivery{Body: []byte(message.FormatID(ids[i]) + " 0000000000000000001 x"), Received: now})
	}
	corr.Handle(publishers.Delivery{Body: []byte("garbage"), Received: now})
	for _, p := range ps {
		if _, err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if s := corr.Stats(); s != (roundtrip.Stats{Acked: 3, OutOfOrder: 1, Unknown: 1}) {
		t.Errorf("stats %+v", s)
	}
}

func TestStartEchoErrors(t *testing.T) {
	b := broker{pub: &fakePub{}}
	cases := []struct {
		name string
		o    roundtrip.EchoOptions
		want string
	}{
		{"no workers", roundtrip.EchoOptions{Workers: 0, Handoff: roundtrip.Queue}, "echo.workers"},
		{"bad handoff", roundtrip.EchoOptions{Workers: 1, Handoff: "pool"}, "echo.handoff"},
		{"bad ack topic", roundtrip.EchoOptions{Workers: 1, Handoff: roundtrip.Queue, Topics: []string{"t"}, AckSuffix: "/bad"}, "echo.ack_suffix"},
		{"negative queue bound", roundtrip.EchoOptions{Workers: 1, Handoff: roundtrip.Queue, QueueMaxMessages: -1}, "echo.queue_max_messages"},
		{"negative queue bytes", roundtrip.EchoOptions{Workers: 1, Handoff: roundtrip.Queue, QueueMaxBytes: -1}, "echo.queue_max_bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Publisher, c.o.Consumer = b.pub, fakeConsumer{}
			_, err := roundtrip.StartEcho(c.o)
			if err == nil || !contains(err.Error(), c.want) {
				t.Errorf("err %v, want one naming %s", err, c.want)
			}
		})
	}
}

// gather returns each metric family's value (counters) or sample count (histograms), summed over its
// series, and fails when a family has a series other than the one broker's.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) != 1 {
			t.Errorf("%s has %d series, want 1 (the broker label only)", mf.GetName(), len(mf.GetMetric()))
		}
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}
