package nats_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every connection, reply handler,
// async publish and embedded server must have ended. rocketmq-client-go (linked through publishers)
// starts a cache janitor at package init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}

// startServer runs a nats-server in the test process on 127.0.0.1 with JetStream (a store of its own)
// and what o adds, ready for connections, until the test ends.
func startServer(t testing.TB, o server.Options) *server.Server {
	t.Helper()
	o.Host, o.NoSigs, o.NoLog, o.JetStream, o.StoreDir = "127.0.0.1", true, true, true, t.TempDir()
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatalf("nats-server on port %d not ready within 5 s", o.Port)
	}
	return s
}
