package nats_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every connection, reply handler,
// async publish and embedded server must have ended. rocketmq-client-go (linked through publishers)
// starts a cache janitor at package init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}
