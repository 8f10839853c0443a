package roundtrip_test

import (
	"context"
	"errors"
	"strings"

	"github.com/mqtarget/mqtarget/publishers"
)

var contains = strings.Contains

// fakePub refuses topics containing '/'.
type fakePub struct{ publishers.Publisher }

func (*fakePub) ValidateTopic(name string) error {
	if strings.Contains(name, "/") {
		return errors.New("no slashes")
	}
	return nil
}

type fakeConsumer struct{}

func (fakeConsumer) Consume(ctx context.Context, _ string, _ func(publishers.Delivery)) error {
	<-ctx.Done()
	return nil
}
func (fakeConsumer) Hosts() []string { return nil }
func (fakeConsumer) Close() error    { return nil }
