package stomp_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/internal/rabbitmqctl"
	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// TestIntegrationRabbitMQPermission runs against the RabbitMQ scripts/test.sh starts, as a user who may
// use only the queues mqt-allowed*: what it may use is stored and acknowledged; a SEND and a batch to a
// queue it may not use answer 502 and nothing is stored, where RabbitMQ answered a transaction's COMMIT
// with its receipt before it refused the SENDs (a 200 for a batch it dropped); a publish to that
// queue again is refused without being sent, naming the broker's refusal.
func TestIntegrationRabbitMQPermission(t *testing.T) {
	testlane.Lock(t, "rabbitmq") // the node other packages stop and restart
	addr, _, _, broker := itest.RealBroker(t, "rabbitmq", "RABBITMQ")
	node := rabbitmqctl.Node{Script: broker.Script, Env: broker.Env}
	const user, pass = "mqt-limited", "mqt-limited-pw"
	_, _ = node.Run("add_user", user, pass) // fails when it exists: fine
	if _, err := node.Run("set_permissions", "-p", "/", user, "^mqt-allowed.*", `^(amq\.default|mqt-allowed.*)$`, "^mqt-allowed.*"); err != nil {
		t.Fatal(err)
	}
	held := func(queue string) int { // -1: no such queue
		t.Helper()
		queues, err := node.Queues("/")
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := queues[queue]; ok {
			return n
		}
		return -1
	}
	c := stomp.DefaultConfig()
	c.Hosts, c.Login, c.Passcode, c.VHost, c.DialTimeout = []string{addr}, user, publishers.Secret(pass), "/", 10*time.Second
	p, err := stomp.New(c, publishertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	allowed, forbidden := "mqt-allowed-"+run, "mqt-forbidden-"+run
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := p.Publish(ctx, 0, allowed, []byte("1")); err != nil {
		t.Fatalf("Publish to %s: %v", allowed, err)
	}
	if err := p.PublishBatch(ctx, 0, allowed, [][]byte{[]byte("2"), []byte("3")}); err != nil {
		t.Fatalf("PublishBatch to %s: %v", allowed, err)
	}
	for _, tc := range []struct {
		name    string
		publish func() error
		unsent  bool // refused without being sent: the refusal is remembered
	}{
		{"batch", func() error { return p.PublishBatch(ctx, 0, forbidden, [][]byte{[]byte("a"), []byte("b")}) }, false},
		{"publish again", func() error { return p.Publish(ctx, 0, forbidden, []byte("c")) }, true},
		{"async again", func() error {
			done := make(chan error, 1)
			if err := p.PublishAsync(0, forbidden, []byte("d"), func(err error) { done <- err }); err != nil {
				return err
			}
			return <-done
		}, true},
	} {
		err := tc.publish()
		switch {
		case !errors.Is(err, publishers.ErrRejected) || !strings.Contains(err.Error(), "ACCESS_REFUSED"):
			t.Errorf("%s to %s: %v, want rejected with RabbitMQ's ACCESS_REFUSED", tc.name, forbidden, err)
		case tc.unsent != strings.Contains(err.Error(), "not sent"):
			t.Errorf("%s to %s: %v; refused unsent: %v, want %v", tc.name, forbidden, err, !tc.unsent, tc.unsent)
		default:
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if err := p.Publish(ctx, 0, allowed, []byte("4")); err != nil { // beside it, on a new connection
		t.Fatalf("Publish to %s after the refusals: %v", allowed, err)
	}
	if n := held(allowed); n != 4 {
		t.Errorf("%s holds %d messages, want the 4 acknowledged", allowed, n)
	}
	if n := held(forbidden); n > 0 {
		t.Errorf("%s holds %d messages, none was acknowledged", forbidden, n)
	}
	_, _ = node.Run("delete_queue", allowed)
}
