package nsq_test

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestIntegrationConformance runs the publishers' conformance suite against two nsqd processes of its
// own (scripts/test.sh builds nsqd and sets MQTARGET_NSQD_BIN).
func TestIntegrationConformance(t *testing.T) {
	bin := itest.NSQDBin(t)
	const maxMsgSize = 1024
	h := &itest.NSQ{}
	for range 2 {
		p := itest.StartNSQDProc(t, bin, "-max-msg-size", strconv.Itoa(maxMsgSize))
		h.TCP = append(h.TCP, p.TCPAddr)
		h.HTTP = append(h.HTTP, p.HTTPAddr)
		h.Procs = append(h.Procs, p)
	}
	f := publishertest.Features{
		NoLogin: "these nsqd run without --auth-http-address (TestIntegrationAuth refuses secrets on one of its own)",
		// nsqWriteTimeout (5 s) is the deadline of a publish without one; a command unanswered a second
		// (nsqStallGrace) past its deadline marks the connection stalled.
		AsyncTimeout: 6 * time.Second,
		Rejections: []publishertest.Rejection{
			{Name: "invalid topic", Topic: "bad!topic", Body: []byte("refused")},
			// README: refused before it is sent (413), so other publishes on the connection are unaffected.
			{Name: "over max-msg-size", Topic: "conformance_oversize", Body: bytes.Repeat([]byte("x"), maxMsgSize+1), Kind: publishers.ErrTooLarge},
		},
	}
	publishertest.Run(t, f, nsqCounted{h}, func(t testing.TB) publishers.Publisher {
		c := nsq.DefaultConfig()
		c.Hosts = h.TCP
		p, err := nsq.New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// nsqCounted consumes as many messages as nsqd says the topic took: NSQ.Consume returns as soon as it
// has the number asked for, which would hide extras and duplicates arriving after it.
type nsqCounted struct{ *itest.NSQ }

func (b nsqCounted) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	stored := b.Stored(t, host, topic)
	// Stored's keep-alive connection would otherwise outlive the publisher's Close in the leak check.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	return b.NSQ.Consume(t, host, topic, max(want, stored), deadline)
}
