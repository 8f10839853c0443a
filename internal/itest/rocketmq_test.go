package itest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/message"
)

func TestRocketMQ(t *testing.T) {
	Lane(t, "rocketmq")
	h := NewRocketMQ(t, RocketMQNamesrv(t))
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })
	t.Run("bad input", func(t *testing.T) { RunBadInput(t, h) })
	t.Run("more hosts than brokers", func(t *testing.T) {
		if len(h.Brokers) >= 3 {
			t.Skip("the cluster has 3 brokers")
		}
		tg := StartTarget(t, h, nil)
		r := tg.Get(t, "/send3Host?topic="+uniqueTopic("it3"))
		if r.Status != http.StatusServiceUnavailable || r.Field != "rocketmq.name_servers" || !strings.Contains(r.Error, "needs 3") {
			t.Fatalf("/send3Host with %d brokers: %d field %q %q, want 503 naming rocketmq.name_servers", len(h.Brokers), r.Status, r.Field, r.Error)
		}
	})
	t.Run("invalid topics", func(t *testing.T) {
		tg := StartTarget(t, h, nil)
		for _, topic := range []string{"TBW102", "RMQ_SYS_TRACE_TOPIC", strings.Repeat("a", 128), "a.b"} {
			if r := tg.Get(t, "/send1?topic="+topic); r.Status != http.StatusBadRequest || r.Field != "topic" {
				t.Errorf("topic %q: %d field %q, want 400 topic", topic, r.Status, r.Field)
			}
		}
	})
	t.Run("shutdown drains async", func(t *testing.T) { RunShutdownDrains(t, h) })
	t.Run("async to a frozen broker", func(t *testing.T) { asyncFrozen(t, h) })
	t.Run("clients hang up on a frozen broker", func(t *testing.T) { hangUpFrozen(t, h) })
	t.Run("broker down", func(t *testing.T) { RunBrokerDown(t, h) })
}

// TestRocketMQACL: against a RocketMQ with ACL 2.0, mqtarget signing as a user delivers through every
// endpoint (a batch too: its signature once left out a field the broker reads as null), and a refused
// login answers 503.
func TestRocketMQACL(t *testing.T) {
	Lane(t, "rocketmq-acl")
	h := NewRocketMQACL(t)
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })
	t.Run("refused login", func(t *testing.T) { RunRefusedLogin(t, h) })
}

// asyncFrozen: async publishes to a hung broker fail by the send timeout (the callback runs once, with
// an error; in rocketmq-client-go v2.1.2 it ran twice, then panicked unrecovered), and the service keeps serving.
func asyncFrozen(t *testing.T, h *RocketMQ) {
	tg := StartTarget(t, h, func(c *config.Config) { c.RocketMQ.SendTimeout = time.Second })
	topic := uniqueTopic("itfrozen")
	// The fresh topic's first publish (its creation on both brokers, its route) can take longer than
	// the 1 s send timeout on a busy CI machine: this is only the precondition, so it may take a few.
	testwait.Until(t, 20*time.Second, "/send1 before the fault", func() error {
		if r := tg.Get(t, "/send1?topic="+topic); r.Status != http.StatusOK {
			return fmt.Errorf("%d %s", r.Status, r.Error)
		}
		return nil
	})
	h.FreezeHost(t, 0)
	thawed := false
	defer func() {
		if !thawed {
			h.ThawHost(t, 0)
		}
	}()
	const n = 5
	for range n {
		if r := tg.Get(t, "/sendAsync?topic="+topic); r.Status != http.StatusAccepted {
			t.Fatalf("sendAsync: %d %s", r.Status, r.Error)
		}
	}
	testwait.Until(t, 10*time.Second, "async publishes to the frozen broker fail", func() error {
		if f := asyncFailed(t, tg); f < n {
			return fmt.Errorf("%v failed", f)
		}
		return nil
	})
	if r := tg.Get(t, "/sendAsyncWait?topic="+topic); r.Status != http.StatusGatewayTimeout {
		t.Errorf("sendAsyncWait to a frozen broker: %d %s, want 504", r.Status, r.Error)
	}
	h.ThawHost(t, 0)
	thawed = true
	testwait.Until(t, 20*time.Second, "/send1 succeeds after the thaw", func() error {
		if r := tg.Get(t, "/send1?topic="+topic); r.Status != http.StatusOK {
			return fmt.Errorf("%d %s", r.Status, r.Error)
		}
		return nil
	})
	if f := asyncFailed(t, tg); f > n+1 {
		t.Errorf("%v async publishes failed, want at most %d (a callback ran twice?)", f, n+1)
	}
}

// asyncFailed reads mqtarget_async_messages_total{result="failed"} from /metrics.
func asyncFailed(t *testing.T, tg *Target) float64 {
	t.Helper()
	return asyncMetrics(t, tg)["failed"]
}

// TestRocketMQStartErrors: a RocketMQ default broker without name servers, or with an unreachable one,
// fails at start naming the setting.
func TestRocketMQStartErrors(t *testing.T) {
	cfg := config.Default()
	cfg.Broker = "rocketmq"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "rocketmq.name_servers") {
		t.Fatalf("broker rocketmq without name servers: %v", err)
	}
}

// hangUpFrozen (issue #9 defect 8): /send1 requests to a frozen broker whose clients give up after about
// a second, and as many whose clients wait for the 504. A publish handed to the client must finish under
// its own deadline and never be resent after a timeout: once thawed, the broker holds each of those
// messages at most once (a timed-out send may still have been stored), plus exactly the acknowledged
// ones. rocketmq-client-go resent a cancelled send at once, up to 1+retries times.
func hangUpFrozen(t *testing.T, h *RocketMQ) {
	tg := StartTarget(t, h, nil) // default retries (2), so a resend would show up as 3 copies
	topic := uniqueTopic("ithangup")
	acked := newLedger(h.Hosts())
	if r := tg.Get(t, "/send1?topic="+topic); r.Status != http.StatusOK {
		t.Fatalf("before the fault: %d %s", r.Status, r.Error)
	} else {
		acked.add(t, r)
	}
	h.FreezeHost(t, 0)
	thawed := false
	defer func() {
		if !thawed {
			h.ThawHost(t, 0)
		}
	}()
	const n = 8 // n hang up, n wait for the answer
	var wg sync.WaitGroup
	hungUp := make(chan error, n)
	waited := make(chan int, n)
	for i := range 2 * n {
		wg.Go(func() {
			if i%2 == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.Base+"/send1?topic="+topic, nil)
				if err != nil {
					hungUp <- err
					return
				}
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
					err = fmt.Errorf("answered %d before the client gave up", resp.StatusCode)
				} else if ctx.Err() == nil {
					err = fmt.Errorf("failed before the client gave up: %w", err)
				} else {
					err = nil
				}
				hungUp <- err
				return
			}
			waited <- tg.Get(t, "/send1?topic="+topic).Status
		})
	}
	wg.Wait()
	close(hungUp)
	close(waited)
	for err := range hungUp {
		if err != nil {
			t.Errorf("hanging-up client: %v", err)
		}
	}
	for status := range waited {
		if status != http.StatusGatewayTimeout {
			t.Errorf("waiting client: %d, want 504 from the frozen broker", status)
		}
	}
	h.ThawHost(t, 0)
	thawed = true
	testwait.Until(t, 20*time.Second, "/send1 succeeds after the thaw", func() error {
		r := tg.Get(t, "/send1?topic="+topic)
		if r.Status != http.StatusOK {
			return fmt.Errorf("%d %s", r.Status, r.Error)
		}
		acked.add(t, r)
		return nil
	})
	for range 4 { // through every producer, behind whatever their connections still carry
		if r := tg.Get(t, "/send1?topic="+topic); r.Status != http.StatusOK {
			t.Fatalf("after the thaw: %d %s", r.Status, r.Error)
		} else {
			acked.add(t, r)
		}
	}
	want := acked.ids[key{0, topic}]
	// Ask for as many as the defect would store and give the broker a bounded while to show them.
	got := h.Consume(t, 0, topic, len(want)+3*2*n, 5*time.Second)
	seen := map[string]int{}
	for _, body := range got {
		id, _, err := message.Parse(body)
		if err != nil {
			t.Fatalf("unparsable message %q: %v", body, err)
		}
		seen[id]++
	}
	unacked := 0
	for id, k := range seen {
		if k > 1 {
			t.Errorf("message %s stored %d times", id, k)
		}
		if _, ok := want[id]; !ok {
			unacked++
		}
	}
	for id := range want {
		if seen[id] == 0 {
			t.Errorf("acknowledged message %s is not in the broker", id)
		}
	}
	if unacked > 2*n {
		t.Errorf("%d unacknowledged messages stored, want at most the %d timed-out requests", unacked, 2*n)
	}
	t.Logf("%d messages stored: %d acknowledged, %d of %d timed-out requests", len(got), len(want), unacked, 2*n)
}
