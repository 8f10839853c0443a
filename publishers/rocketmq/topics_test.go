package rocketmq_test

import (
	"bufio"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/rocketmq"
)

// fakeRMQCreateTopic is UPDATE_AND_CREATE_TOPIC.
const fakeRMQCreateTopic = 17

// TestTopicCreationOutlivesItsCaller: with create_topics, a creation slower than its first caller's
// deadline goes on when that caller leaves, and a caller that joined it with a later deadline gets the
// topic, not the first caller's timeout. The topic is created once.
func TestTopicCreationOutlivesItsCaller(t *testing.T) {
	for _, client := range []string{rocketmq.ClientNative, rocketmq.ClientLibrary} {
		t.Run(client, func(t *testing.T) {
			f := &fakeRocketMQ{}
			var creates atomic.Int32
			f.broker = publishertest.StartFakeServer(t, func(c *publishertest.FakeConn) {
				r := bufio.NewReader(c)
				for {
					q, err := readFakeRMQRequest(r)
					if err != nil {
						return
					}
					if q.code == fakeRMQCreateTopic {
						creates.Add(1)
						time.Sleep(300 * time.Millisecond) // a busy broker: slower than the first caller's deadline
					}
					if c.Send(fakeRMQResponse(0, q.opaque, nil)) != nil {
						return
					}
				}
			})
			f.ns = publishertest.StartFakeServer(t, f.serveNameServer)
			c := rocketmq.DefaultConfig()
			c.Client = client
			c.NameServers = f.Addrs()
			c.CreateTopics = true
			c.Producers = 1
			p, err := rocketmq.New(c, nil, publishertest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			first := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				first <- p.Publish(ctx, 0, "joined", []byte("first"))
			}()
			testwait.For(t, 2*time.Second, "the first caller's creation to reach the broker", func() bool { return creates.Load() > 0 })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := p.Publish(ctx, 0, "joined", []byte("second")); err != nil {
				t.Errorf("second publish (3 s deadline) joining the creation: %v, want success", err)
			}
			if err := <-first; !errors.Is(err, publishers.ErrTimeout) {
				t.Errorf("first publish (100 ms deadline): %v, want its own timeout", err)
			}
			if n := creates.Load(); n != 1 {
				t.Errorf("topic created %d times, want once", n)
			}
		})
	}
}
