package rocketmq_test

import (
	"bytes"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// TestIntegrationConformance runs the publishers' conformance suite against the RocketMQ scripts/test.sh
// starts, freezing broker-a through scripts/rocketmq.sh pid: it takes that cluster's lane
// (internal/itest's tests stop and freeze it too).
func TestIntegrationConformance(t *testing.T) {
	testlane.Lock(t, "rocketmq")
	ns := itest.RocketMQNamesrv(t)
	h := itest.NewRocketMQ(t, ns)
	const sendTimeout = 2 * time.Second
	f := publishertest.Features{
		AsyncTimeout: sendTimeout, // rocketmq.send_timeout bounds every send, retries included
		NoLogin:      "this cluster runs without ACL; TestIntegrationACL checks refused logins on the ACL cluster scripts/test.sh starts beside it",
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
				c.Queues = itest.RocketMQQueues
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
