package roundtrip_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/roundtrip"
	"github.com/mqtarget/mqtarget/message"
)

// TestRoundTripNoHeader: a payload whose ack could not be matched is refused with ErrNoHeader before
// anything is published or counted.
func TestRoundTripNoHeader(t *testing.T) {
	cases := []struct {
		name string
		body []byte
	}{
		{name: "shorter than the header", body: []byte("0123456789")},
		{name: "one byte short", body: message.NewSource().Build(1, message.HeaderLen)[:message.HeaderLen-1]},
		{name: "not a header", body: []byte(strings.Repeat("x", message.HeaderLen))},
	}
	b := newMemBroker(1, 0)
	corr := roundtrip.NewCorrelator("mem", time.Minute, nil)
	client := roundtrip.NewClient(memPub{b}, newMemConsumer(b), []string{"t"}, "", corr, quiet)
	defer client.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := client.RoundTrip(context.Background(), 0, "t", c.body)
			if !errors.Is(err, roundtrip.ErrNoHeader) {
				t.Errorf("err %v, want roundtrip.ErrNoHeader", err)
			}
		})
	}
	if n := b.publishedTo(0, "t"); n != 0 {
		t.Errorf("%d published, want none", n)
	}
	if s := corr.Stats(); s != (roundtrip.Stats{}) {
		t.Errorf("stats %+v, want nothing counted", s)
	}
}
