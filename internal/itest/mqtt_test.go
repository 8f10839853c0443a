package itest

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/consume"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// The MQTT tests run against mosquitto brokers of scripts/mosquitto.sh that each test starts on ports
// of its own (MQTARGET_INTEGRATION=1; scripts/test.sh installs mosquitto and mosquitto-clients).

// TestMQTT, at both protocol versions: two brokers that take one login, two hosts: every endpoint's
// ledger against mosquitto_sub, bad input, the async drain, a stopped and a frozen broker, a wrong
// password (503), and /send3Host with two.
func TestMQTT(t *testing.T) {
	Lane(t, "mqtt-itest") // brokers of its own: no turn behind publishers/mqtt's tests of the shared ones
	Integration(t)
	for _, v := range []string{"5", "3.1.1"} {
		t.Run("v"+v, func(t *testing.T) {
			h := NewMQTTLogin(t, 2)
			h.Version = v
			RunSuite(t, h)
			t.Run("send3Host with 2 servers", func(t *testing.T) { RunTooFewHosts(t, h, "mqtt.servers") })
		})
	}
}

// TestMQTTFaults kills and freezes one broker of its own under load at QoS 1, at both protocol
// versions (two clients: paho.golang at 5, paho.mqtt.golang at 3.1.1).
func TestMQTTFaults(t *testing.T) {
	Lane(t, "mqtt-itest")
	Integration(t)
	for _, v := range []string{"5", "3.1.1"} {
		t.Run("v"+v, func(t *testing.T) {
			h := NewMQTT(t, 1)
			h.Version = v
			RunFaults(t, h)
		})
	}
}

// TestRoundTripMQTT: /sendRoundTrip, and consume over what /send1 published with the consumer
// subscribed first (an MQTT broker keeps nothing for a topic nobody subscribes to, so the shared
// consume check, which publishes first, cannot apply).
func TestRoundTripMQTT(t *testing.T) {
	Lane(t, "mqtt-itest")
	Integration(t)
	h := NewMQTT(t, 2)
	t.Run("batch", func(t *testing.T) {
		runBatch(t, h)
	})
	t.Run("sendRoundTrip", func(t *testing.T) { runSendRoundTrip(t, h) })
	t.Run("consume", func(t *testing.T) { runConsumeSubscribed(t, h) })
}

// runConsumeSubscribed: consume.Run (the consume command's core) subscribes first; once a sentinel
// published to each host came back through it, /send1 publishes consumeCount messages, and the report
// must count exactly those: nothing lost, nothing twice.
func runConsumeSubscribed(t *testing.T, h Harness) {
	tg := StartTarget(t, h, nil)
	topic := FreshTopic("rtconsume")
	cfg, addrs := harnessConfig(h)
	b := brokers.Lookup(cfg.Broker)
	inner, err := b.OpenConsumer(&cfg.Sections, addrs, publishers.ConsumerOptions{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	pub, err := b.Open(&cfg.Sections, addrs, cfg.Common(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	cons := &sentinelFilter{Consumer: inner, back: map[int]bool{}}
	type result struct {
		r   consume.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := consume.Run(context.Background(), cons, consume.Options{Broker: cfg.Broker, Topic: topic, Count: consumeCount, Duration: 30 * time.Second})
		done <- result{r, err}
	}()
	waitFor(t, 10*time.Second, "a sentinel back from every host", func() bool {
		all := true
		for i := range addrs {
			if !cons.isBack(i) {
				all = false
				ctx, cancel := context.WithTimeout(context.Background(), PublishTimeout)
				_ = pub.Publish(ctx, i, topic, []byte(sentinelBody+randomHex(4)))
				cancel()
			}
		}
		return all
	})
	for i := range consumeCount {
		if r := tg.Get(t, "/send1?size=200&topic="+topic); r.Status != http.StatusOK {
			t.Fatalf("/send1 %d: %d %s", i, r.Status, r.Error)
		}
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.r
	if r.Count != consumeCount || r.Lost != 0 || r.Duplicates != 0 || r.Unparsable != 0 || !r.OK() || len(r.Runs) != 1 ||
		r.Runs[0].Received != consumeCount || r.Runs[0].LastSeq-r.Runs[0].FirstSeq != consumeCount-1 {
		t.Fatalf("report %+v, want %d messages of one run, nothing lost or duplicated", r, consumeCount)
	}
}

// sentinelFilter is a consumer that keeps sentinels (bodies starting with sentinelBody) from its
// caller and notes the hosts they came back from.
type sentinelFilter struct {
	publishers.Consumer
	mu   sync.Mutex
	back map[int]bool
}

func (f *sentinelFilter) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	return f.Consumer.Consume(ctx, topic, func(d publishers.Delivery) {
		if bytes.HasPrefix(d.Body, []byte(sentinelBody)) {
			f.mu.Lock()
			f.back[d.Host] = true
			f.mu.Unlock()
			return
		}
		handle(d)
	})
}

func (f *sentinelFilter) isBack(host int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.back[host]
}
