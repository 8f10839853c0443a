package handlers_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
)

// TestSendRoundTrip drives /sendRoundTrip against embedded nsqd, with a real echo on one topic and none
// on another.
func TestSendRoundTrip(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	cfg, pub := itest.EmbeddedNSQ(t, 1)
	consumer := func(group string) publishers.Consumer {
		c, err := nsq.NewConsumer(cfg, publishers.ConsumerOptions{Group: group}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	echoed, silent := itest.FreshTopic("rt"), itest.FreshTopic("silent")
	echo, err := roundtrip.StartEcho(roundtrip.EchoOptions{Broker: "nsq", Consumer: consumer("echo"), Publisher: pub,
		Topics: []string{echoed}, Handoff: roundtrip.Queue, Workers: 2, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	corr := roundtrip.NewCorrelator("nsq", time.Minute, nil)
	client := roundtrip.NewClient(pub, consumer("acks"), []string{echoed, silent}, "", corr, quiet)
	defer client.Close()

	fake := &fakePub{hosts: []string{"fake:1"}}
	ts := newServer(t, nil, func(o *handlers.Options) {
		o.Publishers = map[string]publishers.Publisher{"nsq": pub, "stomp": fake}
		o.RoundTrips = map[string]handlers.RoundTripper{"nsq": client}
		// The "no echo" case waits all of it out; the echoed ones take two publishes and two
		// deliveries through the embedded nsqd, and the first waits for the subscriptions: a busy CI
		// run took past 500 ms.
		o.PublishTimeout = 3 * time.Second
	})

	cases := []struct {
		name   string
		method string
		target string
		body   string
		status int
		field  string
	}{
		{name: "echoed", method: http.MethodGet, target: "/sendRoundTrip?topic=" + echoed + "&size=64", status: http.StatusOK},
		{name: "echoed by POST", method: http.MethodPost, target: "/sendRoundTrip?topic=" + echoed, status: http.StatusOK},
		{name: "no echo", method: http.MethodGet, target: "/sendRoundTrip?topic=" + silent, status: http.StatusGatewayTimeout},
		{name: "topic without acks", method: http.MethodGet, target: "/sendRoundTrip?topic=other", status: http.StatusBadRequest, field: "topic"},
		{name: "broker without round trips", method: http.MethodGet, target: "/sendRoundTrip?broker=stomp&topic=" + echoed, status: http.StatusNotImplemented, field: "echo.roundtrip"},
		{name: "a body", method: http.MethodPost, target: "/sendRoundTrip?topic=" + echoed, body: "payload", status: http.StatusBadRequest, field: "body"},
		{name: "a spread", method: http.MethodGet, target: "/sendRoundTrip?topics=2&topic=" + echoed, status: http.StatusBadRequest, field: "topics"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := ts.do(c.method, c.target, c.body)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
			var got struct {
				ID    string  `json:"id"`
				Topic string  `json:"topic"`
				RTT   float64 `json:"rtt_ms"`
				Field string  `json:"field"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, w.Body)
			}
			if got.Field != c.field {
				t.Errorf("field %q, want %q", got.Field, c.field)
			}
			if c.status == http.StatusOK {
				if _, err := message.ParseID(got.ID); err != nil || got.Topic != echoed || got.RTT <= 0 {
					t.Errorf("reply %s", w.Body)
				}
			}
		})
	}
	if s := corr.Stats(); s.Acked != 2 || s.Lost != 1 || s.Duplicates != 0 {
		t.Errorf("correlator %+v, want 2 acked and 1 lost", s)
	}
	if n := len(fake.calls); n != 0 {
		t.Errorf("the broker without round trips got %d publishes", n)
	}
}
