package itest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/kafka"
)

// The Kafka cluster of these tests is one of their own (scripts/test.sh starts it beside the one of
// publishers/kafka's tests, which kill and freeze their brokers while this package runs):
// MQTARGET_KAFKA_TEST_HTTP_BROKERS is its bootstrap address, MQTARGET_KAFKA_TEST_HTTP_ENV the KAFKA_*
// settings it was started with (space-separated VAR=VALUE), so scripts/kafka.sh finds, kills,
// freezes and restarts its brokers and runs Kafka's own tools against it.
func kafkaCluster(t *testing.T) *Kafka {
	Integration(t)
	bs := os.Getenv("MQTARGET_KAFKA_TEST_HTTP_BROKERS")
	if bs == "" {
		t.Fatal("MQTARGET_KAFKA_TEST_HTTP_BROKERS is not set (scripts/test.sh starts a Kafka with scripts/kafka.sh and sets it)")
	}
	env := strings.Fields(os.Getenv("MQTARGET_KAFKA_TEST_HTTP_ENV"))
	h := NewKafka(t, strings.Split(bs, ","), env)
	if len(h.Hosts()) < 2 {
		t.Fatalf("the cluster at %s has %d brokers, the suite needs 2 (KAFKA_BROKERS=2)", bs, len(h.Hosts()))
	}
	return h
}

// TestKafka: every endpoint's ledger (the records Kafka holds per partition, by its end offsets and
// by GetOffsetShell, are exactly the 2xx answers per host), bad input, the async drain at shutdown,
// and the endpoints that need more hosts than the cluster has brokers.
func TestKafka(t *testing.T) {
	Lane(t, "kafka-http")
	h := kafkaCluster(t)
	t.Run("delivery", func(t *testing.T) {
		h.Track()
		RunDelivery(t, h)
		if !t.Failed() {
			h.CheckTracked(t)
		}
	})
	t.Run("bad input", func(t *testing.T) { RunBadInput(t, h) })
	t.Run("more hosts than brokers", func(t *testing.T) {
		n := len(h.Hosts())
		if n >= 3 {
			t.Skip("the cluster has 3 brokers")
		}
		tg := StartTarget(t, h, nil)
		topic := uniqueTopic("it3")
		for range 3 {
			r := tg.Get(t, "/send3Host?topic="+topic)
			if r.Status != http.StatusServiceUnavailable || r.Field != kafka.Section+"."+kafka.AddrsKey || !strings.Contains(r.Error, "needs 3") {
				t.Fatalf("/send3Host with %d brokers: %d field %q %q, want 503 naming kafka.brokers", n, r.Status, r.Field, r.Error)
			}
		}
		for host := range n {
			if got := h.Stored(t, host, topic); got != 0 {
				t.Errorf("host %d holds %d records after refused requests", host, got)
			}
		}
	})
	t.Run("shutdown drains async", func(t *testing.T) { RunShutdownDrains(t, h) })
}

// TestKafkaFaults kills broker 0 (host 0: the single-host endpoints publish to its partition) and
// freezes it, under load through HTTP; broker 1 and the controller run on.
func TestKafkaFaults(t *testing.T) {
	Lane(t, "kafka-http")
	h := kafkaCluster(t)
	if !h.CanStop() {
		t.Fatal("MQTARGET_KAFKA_TEST_HTTP_ENV is not set: no broker to kill")
	}
	RunFaults(t, h)
}

// TestRoundTripKafka: the batch experiment, /sendRoundTrip and consume.Run against the cluster.
func TestRoundTripKafka(t *testing.T) {
	Lane(t, "kafka-http")
	RunRoundTrip(t, kafkaCluster(t))
}

// TestKafkaConsumer: the product's publisher and group consumer, every record back once from the host
// it was published to.
func TestKafkaConsumer(t *testing.T) {
	Lane(t, "kafka-http")
	h := kafkaCluster(t)
	cfg := kafka.DefaultConfig()
	cfg.Brokers = h.Bootstrap
	pub, err := kafka.New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cons, err := kafka.NewConsumer(cfg, publishers.ConsumerOptions{Group: FreshTopic("consume")}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	CheckConsume(t, pub, cons, FreshTopic("consume"), 500)
}

// TestKafkaScriptSettings: scripts/kafka.sh start on a cluster that runs with the same settings says so
// and leaves it be; asked for other listeners (here a TLS port the cluster was not started with) it
// refuses, exit 1 naming the difference, instead of passing the running cluster off as one that has
// them. The brokers run on unchanged either way.
func TestKafkaScriptSettings(t *testing.T) {
	Lane(t, "kafka-http")
	h := kafkaCluster(t)
	if !h.CanStop() {
		t.Fatal("MQTARGET_KAFKA_TEST_HTTP_ENV is not set: no script environment")
	}
	pids := make([]int, len(h.Hosts()))
	for host := range pids {
		pids[host] = h.pid(t, host)
	}
	start := func(extra ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", h.script, "start")
		cmd.Env = append(append(os.Environ(), h.Env...), extra...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("scripts/kafka.sh start: %v\n%s", err, out)
		return "", 0
	}
	if out, code := start(); code != 0 || !strings.Contains(out, "already running") {
		t.Errorf("start with the same settings: exit %d, want 0 and \"already running\":\n%s", code, out)
	}
	if out, code := start("KAFKA_TLS_PORT=29990"); code != 1 || !strings.Contains(out, "already running with other settings") ||
		!strings.Contains(out, "server.properties differs") {
		t.Errorf("start asking for a TLS listener: exit %d, want 1 naming the other settings:\n%s", code, out)
	}
	for host, pid := range pids {
		if got := h.pid(t, host); got != pid {
			t.Errorf("broker of host %d: pid %d, was %d", host, got, pid)
		}
	}
}
