package itest

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// The publisher conformance suite (publishers/publishertest) against real brokers: nsqd processes started
// here, and the Artemis and RocketMQ that scripts/test.sh runs. These tests live here rather than beside
// the publishers because they freeze Artemis and RocketMQ's broker-a, which this package's tests also stop
// and freeze: go test runs packages in parallel, the tests of one package one after another.
// (publishers/conformance_test.go runs the suite against the embedded go-stomp server.)

func TestConformanceNSQ(t *testing.T) {
	bin := nsqdBin(t)
	const maxMsgSize = 1024
	h := &NSQ{}
	for range 2 {
		p := StartNSQDProc(t, bin, "-max-msg-size", strconv.Itoa(maxMsgSize))
		h.TCP = append(h.TCP, p.TCPAddr)
		h.HTTP = append(h.HTTP, p.HTTPAddr)
		h.Procs = append(h.Procs, p)
	}
	f := publishertest.Features{
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
type nsqCounted struct{ *NSQ }

func (b nsqCounted) Consume(t testing.TB, host int, topic string, want int, deadline time.Duration) [][]byte {
	stored := b.Stored(t, host, topic)
	// Stored's keep-alive connection would otherwise outlive the publisher's Close in the leak check.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	return b.NSQ.Consume(t, host, topic, max(want, stored), deadline)
}

func TestConformanceArtemis(t *testing.T) {
	testlane.Lock(t, "artemis") // not parallel (process-wide checks), but a turn against other packages
	addr, login, pass, ctl := realBroker(t, "artemis", "ARTEMIS")
	h := &STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Persistent: true, Ctl: []BrokerControl{ctl}}
	f := publishertest.Features{
		// stompReceiptTimeout: a connection whose oldest receipt is 30 s late is failed.
		AsyncTimeout: 30 * time.Second,
		Rejections: []publishertest.Rejection{
			// Artemis answers ERROR AMQ229216 "Invalid queue name" to both.
			{Name: "empty destination name", Topic: "", Body: []byte("refused")},
			{Name: "fully qualified name without queue", Topic: "conformance::", Body: []byte("refused")},
		},
	}
	publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
		c := stomp.DefaultConfig()
		c.Hosts = h.Addrs
		c.Login = h.Login
		c.Passcode = publishers.Secret(h.Passcode)
		c.Persistent = h.Persistent
		p, err := stomp.New(c, publishertest.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// TestConformanceRocketMQ freezes broker-a through scripts/rocketmq.sh pid, as TestRocketMQ does.
func TestConformanceRocketMQ(t *testing.T) {
	testlane.Lock(t, "rocketmq") // not parallel (process-wide checks), but a turn against other packages
	ns := rocketmqNamesrv(t)
	h := NewRocketMQ(t, ns)
	const sendTimeout = 2 * time.Second
	f := publishertest.Features{
		AsyncTimeout: sendTimeout, // rocketmq.send_timeout bounds every send, retries included
		Rejections: []publishertest.Rejection{
			// The broker's maxMessageSize is 4 MiB; the client does not check it (and compression is off).
			{Name: "over maxMessageSize", Topic: "conformance_oversize", Body: bytes.Repeat([]byte("x"), 4<<20+1)},
		},
		// rocketmq-client-go's rmqClient.Start (internal/client.go) runs scheduled tasks that sleep before
		// their first run with time.Sleep, not a select on the client's done channel, and notice a Shutdown
		// only after it. Close waits for those sleeping 10 ms and 1 s, and for every connection reader;
		// these two sleep 10 s (name server address update, consumer offset persistence), longer than the
		// suite lets Close take on a publisher started just before. After waking they do nothing for a
		// producer (static name server list, no consumer) and end, at most 10 s after the start.
		IgnoreGoroutines: []goleak.Option{
			goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.1"),
			goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.4"),
		},
	}
	// Both send paths (rocketmq.client) keep the same guarantees.
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		t.Run(client, func(t *testing.T) {
			publishertest.Run(t, f, h, func(t testing.TB) publishers.Publisher {
				c := rocketmq.DefaultConfig()
				c.NameServers = []string{ns}
				c.SendTimeout = sendTimeout
				c.CreateTopics = true // the suite's fresh topics then exist on every broker
				c.Queues = rocketmqQueues
				c.Client = client
				p, err := rocketmq.New(c, nil, publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}
