package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// noAcks is an ack consumer to which no ack ever comes.
type noAcks struct{}

func (noAcks) Consume(ctx context.Context, _ string, _ func(publishers.Delivery)) error {
	<-ctx.Done()
	return nil
}
func (noAcks) Hosts() []string { return nil }
func (noAcks) Close() error    { return nil }

// TestSendRoundTripSize: a size too small for the header the ack is matched by is the client's
// mistake, a 400 naming size before anything is published, not a 500 logged as an error; the smallest
// size that holds the header is published (and, no echo running, ends in 504).
func TestSendRoundTripSize(t *testing.T) {
	cases := []struct {
		name      string
		target    string
		size      int // default message size (message.size)
		status    int
		field     string
		published int
	}{
		{name: "size 1", target: "/sendRoundTrip?size=1", size: defSize, status: http.StatusBadRequest, field: "size"},
		{name: "one byte short", target: "/sendRoundTrip?size=36", size: defSize, status: http.StatusBadRequest, field: "size"},
		{name: "a small default size", target: "/sendRoundTrip", size: 10, status: http.StatusBadRequest, field: "size"},
		{name: "the header exactly", target: "/sendRoundTrip?size=37", size: defSize, status: http.StatusGatewayTimeout, published: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			pub := newFake(1)
			client := roundtrip.NewClient(pub, noAcks{}, []string{defTopic}, "", roundtrip.NewCorrelator("nsq", time.Minute, nil), nil)
			defer client.Close()
			ts := newServer(t, pub, func(o *handlers.Options) {
				o.RoundTrips = map[string]handlers.RoundTripper{"nsq": client}
				o.MessageSize = c.size
				o.PublishTimeout = 50 * time.Millisecond // the 504 of the valid size
				o.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
			})
			w := ts.do(http.MethodGet, c.target, "")
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
			var got struct {
				Error string `json:"error"`
				Field string `json:"field"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, w.Body)
			}
			if got.Field != c.field {
				t.Errorf("field %q, want %q: %s", got.Field, c.field, w.Body)
			}
			if c.field == "size" && !strings.Contains(got.Error, "37") {
				t.Errorf("error %q does not name the minimum, %d", got.Error, message.HeaderLen)
			}
			if n := len(pub.Calls()); n != c.published {
				t.Errorf("%d publishes, want %d", n, c.published)
			}
			if logs.Len() > 0 {
				t.Errorf("logged at error level:\n%s", logs.String())
			}
		})
	}
}
