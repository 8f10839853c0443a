package publishertest

import (
	"context"
	"fmt"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// Way is one of a publisher's three ways to publish to a topic, as a test drives it: Publish of one
// body, PublishBatch of two, or PublishAsync waited for (AsyncResult). Publish returns what it came to.
type Way struct {
	Name    string
	Publish func() error
}

// Ways are p's three ways to publish to topic on host, in the order Publish, PublishBatch,
// PublishAsync: four messages in all. ctx bounds the first two; the async one's done is waited for
// up to wait.
func Ways(ctx context.Context, p publishers.Publisher, host int, topic string, wait time.Duration) []Way {
	return []Way{
		{"Publish", func() error { return p.Publish(ctx, host, topic, []byte("publish")) }},
		{"PublishBatch", func() error {
			return p.PublishBatch(ctx, host, topic, [][]byte{[]byte("batch 1"), []byte("batch 2")})
		}},
		{"PublishAsync", func() error { return AsyncResult(p, host, topic, []byte("async"), wait) }},
	}
}

// AsyncResult publishes body with p.PublishAsync and returns its refusal, or else the error its done
// ran with (nil: acknowledged); a done that has not run within wait is an error of its own.
func AsyncResult(p publishers.Publisher, host int, topic string, body []byte, wait time.Duration) error {
	done := make(chan error, 1)
	if err := p.PublishAsync(host, topic, body, func(err error) { done <- err }); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		return fmt.Errorf("PublishAsync's done did not run within %v", wait)
	}
}
