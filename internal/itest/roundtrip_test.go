package itest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/drive/consume"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// The way back on every broker: the batch experiment (`mqtarget roundtrip`'s roundtrip.Run),
// /sendRoundTrip on a running service and `mqtarget consume`'s consume.Run over what /send1 published.
// The echo's accounting with a dropped or doubled ack (lost = 1, duplicates = 1) is checked in
// internal/roundtrip against embedded brokers and real nsqd.

func TestRoundTripNSQ(t *testing.T) {
	Lane(t, "nsq")
	RunRoundTrip(t, NewNSQProcs(t, NSQDBin(t), 2))
}

func TestRoundTripEmbeddedNSQ(t *testing.T) {
	tg := StartTarget(t, nil, nil)
	tcp, http := embeddedNSQ(tg)
	RunRoundTrip(t, &NSQ{TCP: tcp, HTTP: http})
}

func TestRoundTripEmbeddedSTOMP(t *testing.T) {
	tg := StartTarget(t, nil, func(c *config.Config) { c.Broker = "stomp" })
	RunRoundTrip(t, &STOMP{Addrs: embeddedSTOMP(tg)})
}

func TestRoundTripArtemis(t *testing.T) {
	Lane(t, "artemis")
	addr, login, pass, _ := RealBroker(t, "artemis", "ARTEMIS")
	RunRoundTrip(t, &STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Persistent: true})
}

func TestRoundTripActiveMQ(t *testing.T) {
	Lane(t, "activemq")
	addr, login, pass, _ := RealBroker(t, "activemq", "ACTIVEMQ")
	RunRoundTrip(t, &STOMP{Addrs: []string{addr}, Login: login, Passcode: pass})
}

func TestRoundTripRocketMQ(t *testing.T) {
	Lane(t, "rocketmq")
	RunRoundTrip(t, NewRocketMQ(t, RocketMQNamesrv(t)))
}

// RunRoundTrip runs the round-trip checks against h, as subtests.
func RunRoundTrip(t *testing.T, h Harness) {
	t.Run("batch", func(t *testing.T) { runBatch(t, h) })
	t.Run("sendRoundTrip", func(t *testing.T) { runSendRoundTrip(t, h) })
	t.Run("consume", func(t *testing.T) { runConsume(t, h) })
}

// harnessConfig is the service's default configuration pointed at h, with the suite's publish timeout.
func harnessConfig(h Harness) (config.Config, []string) {
	cfg := config.Default()
	cfg.Broker = h.Broker()
	cfg.PublishTimeout = PublishTimeout
	h.Configure(&cfg)
	return cfg, brokers.Lookup(cfg.Broker).Addrs(&cfg.Sections)
}

// batchCount keeps a batch to a second or two on the slowest broker here.
const batchCount = 300

// runBatch: a batch through either handoff comes back exactly once, and no latency exceeds the time the
// whole batch took.
func runBatch(t *testing.T, h Harness) {
	for _, handoff := range []roundtrip.Handoff{roundtrip.Queue, roundtrip.Direct} {
		t.Run(string(handoff), func(t *testing.T) {
			cfg, addrs := harnessConfig(h)
			cfg.Echo.Topics = []string{FreshTopic("rtbatch")}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			start := time.Now()
			r, err := roundtrip.Run(ctx, cfg, addrs, roundtrip.RunOptions{Count: batchCount, Size: 1024, Producers: 4,
				Handoff: handoff, Workers: 4, Echo: true, Wait: 30 * time.Second, ProbeWait: 60 * time.Second}, testLogger(t))
			total := float64(time.Since(start).Microseconds()) / 1000
			if err != nil {
				t.Fatal(err)
			}
			if r.Broker != h.Broker() || r.Count != batchCount || r.Size != 1024 || r.Lost != 0 || r.Duplicates != 0 || !r.OK() {
				t.Fatalf("row %+v: want all %d messages back exactly once", r, batchCount)
			}
			if r.SendMs <= 0 || r.SendMs > total || r.ReturnLastLatencyMs <= 0 || r.ReturnLastLatencyMs > r.RTTMaxMs || r.RTTMaxMs > total ||
				r.EchoLastLatencyMs <= 0 || r.EchoLastLatencyMs > r.EchoMaxLatencyMs || r.EchoMaxLatencyMs > r.RTTMaxMs || r.ReturnReceiveMs > total ||
				r.EchoReceiveMs > total || r.RTTP50Ms > r.RTTP99Ms || r.RTTP99Ms > r.RTTMaxMs {
				t.Errorf("times inconsistent with the batch's %.3f ms: %+v", total, r)
			}
		})
	}
}

// runSendRoundTrip: /sendRoundTrip answers 200 with a round-trip time once the service's own echo
// returns the message, and 504 within the publish timeout when no echo runs.
func runSendRoundTrip(t *testing.T, h Harness) {
	t.Run("echoed", func(t *testing.T) {
		topic := FreshTopic("rthttp")
		tg := StartTarget(t, h, func(c *config.Config) {
			c.Echo.Enabled, c.Echo.RoundTrip, c.Echo.Topics = true, true, []string{topic}
		})
		// The first waits for the service's probes (roundtrip.Client.StartProbes) and may time out while
		// they run longer than publish_timeout (RocketMQ: until the ack topic exists).
		testwait.Until(t, 30*time.Second, "a first round trip", func() error {
			if r := tg.Get(t, "/sendRoundTrip"); r.Status != http.StatusOK {
				return fmt.Errorf("%d %s", r.Status, r.Error)
			}
			return nil
		})
		for i := range 5 {
			r := tg.Get(t, "/sendRoundTrip?size=512")
			if r.Status != http.StatusOK || r.Broker != h.Broker() || r.Topic != topic {
				t.Fatalf("round trip %d: %d %q broker %q topic %q, want 200 on %s %s", i, r.Status, r.Error, r.Broker, r.Topic, h.Broker(), topic)
			}
			if took := float64(r.Took.Microseconds()) / 1000; r.RTTMs <= 0 || r.RTTMs > took {
				t.Errorf("round trip %d: rtt_ms %.3f, the request took %.3f ms", i, r.RTTMs, took)
			}
		}
	})
	t.Run("no echo", func(t *testing.T) {
		topic := FreshTopic("rtsilent")
		tg := StartTarget(t, h, func(c *config.Config) {
			c.Echo.Enabled, c.Echo.RoundTrip, c.Echo.Topics = false, true, []string{topic}
		})
		r := tg.Get(t, "/sendRoundTrip")
		if r.Status != http.StatusGatewayTimeout || r.Took > PublishTimeout+time.Second {
			t.Errorf("without an echo: %d %q after %v, want 504 within %v", r.Status, r.Error, r.Took, PublishTimeout+time.Second)
		}
	})
}

// consumeCount is how many /send1 requests the consume check publishes.
const consumeCount = 200

// runConsume: what /send1 published is read back by consume.Run, the consume command's core, with exact
// counts: all of it, nothing lost, nothing twice.
func runConsume(t *testing.T, h Harness) {
	tg := StartTarget(t, h, nil)
	topic := FreshTopic("rtconsume")
	for i := range consumeCount {
		if r := tg.Get(t, "/send1?size=200&topic="+topic); r.Status != http.StatusOK {
			t.Fatalf("/send1 %d: %d %s", i, r.Status, r.Error)
		}
	}
	cfg, addrs := harnessConfig(h)
	cons, err := brokers.Lookup(cfg.Broker).OpenConsumer(&cfg.Sections, addrs, publishers.ConsumerOptions{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	start := time.Now()
	r, err := consume.Run(context.Background(), cons, consume.Options{Broker: cfg.Broker, Topic: topic, Count: consumeCount, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != consumeCount || r.Lost != 0 || r.Duplicates != 0 || r.Unparsable != 0 || !r.OK() || len(r.Runs) != 1 ||
		r.Runs[0].Received != consumeCount || r.Runs[0].LastSeq-r.Runs[0].FirstSeq != consumeCount-1 {
		t.Fatalf("report %+v, want %d messages of one run, nothing lost or duplicated", r, consumeCount)
	}
	if elapsed := float64(time.Since(start).Microseconds()) / 1000; r.ElapsedMS > elapsed || r.Latency.Min <= 0 || r.Latency.Max < r.Latency.P99 {
		t.Errorf("report times %+v, consume took %.3f ms", r, elapsed)
	}
}
