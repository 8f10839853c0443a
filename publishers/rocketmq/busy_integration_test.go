package rocketmq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// TestIntegrationBusy: a broker shedding load answers SYSTEM_BUSY for the sends it dropped from its
// send queue without storing them (its fast failure; waitTimeMillsInSendQueue 0 here, so that every
// send the broker finds waiting is dropped). Neither send path answers such a send as stored: without
// retries it is unavailable (503) with the broker's words, with them it is resent (it stored nothing,
// so a resend cannot duplicate it), and either way the broker holds exactly what was acknowledged.
func TestIntegrationBusy(t *testing.T) {
	testlane.Lock(t, "rocketmq")
	ns := itest.RocketMQNamesrv(t)
	h := itest.NewRocketMQ(t, ns)
	h.SetBrokerConfig(t, 0, "waitTimeMillsInSendQueue", "0")
	const n = 3000
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		for _, retries := range []int{0, rocketmq.DefaultConfig().Retries} {
			t.Run(fmt.Sprintf("%s/retries %d", client, retries), func(t *testing.T) {
				topic := fmt.Sprintf("busy_%s_%d_%d", client, retries, time.Now().UnixNano()%1e9)
				c := rocketmq.DefaultConfig()
				c.NameServers = []string{ns}
				c.Client = client
				c.Retries = retries
				c.SendTimeout = 10 * time.Second
				c.CreateTopics = true
				c.Queues = itest.RocketMQQueues
				p, err := rocketmq.New(c, []string{topic}, publishertest.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				results := make(chan error, n)
				for i := range n {
					if err := p.PublishAsync(0, topic, fmt.Appendf(nil, "m%d", i), func(err error) { results <- err }); err != nil {
						results <- err
					}
				}
				acked, busy := 0, 0
				var other []error
				for range n {
					select {
					case err := <-results:
						switch {
						case err == nil:
							acked++
						case errors.Is(err, publishers.ErrUnavailable) && strings.Contains(err.Error(), "busy"):
							busy++
						default:
							other = append(other, err)
						}
					case <-time.After(30 * time.Second):
						t.Fatal("an async publish never finished")
					}
				}
				t.Logf("%d async publishes: %d acknowledged, %d refused as busy (503), %d other", n, acked, busy, len(other))
				for i, err := range other {
					if i == 3 {
						break
					}
					t.Errorf("an async publish: %v, want success or unavailable naming the broker's busy", err)
				}
				if retries == 0 && busy == 0 {
					t.Errorf("the broker refused nothing as busy: the test did not load it enough to check its refusals")
				}
				if stored := h.Stored(t, 0, topic); stored != acked {
					t.Errorf("the broker stored %d messages, %d were acknowledged", stored, acked)
				}
			})
		}
	}
}
