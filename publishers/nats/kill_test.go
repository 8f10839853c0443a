package nats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testlane"
	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nats"
)

// TestIntegrationKill9 kills a real nats-server (scripts/nats.sh start; MQTARGET_NATS_KILL_PIDFILE is its
// $NATS_DATA/mqtarget-broker.pid, the NATS_* variables of that start in the environment) with SIGKILL
// while async and sync publishes run, starts it again with the script, and checks: every publish ended
// (done ran once; failures unavailable or timeout), publishing recovers, and the stream holds every
// message acknowledged (/jsz), the surplus being messages stored whose PubAck the kill lost.
func TestIntegrationKill9(t *testing.T) {
	testlane.Lock(t, "nats") // the real brokers other packages stop and freeze too
	pidfile, servers, monitors := os.Getenv("MQTARGET_NATS_KILL_PIDFILE"), os.Getenv("MQTARGET_NATS_TEST_SERVERS"), os.Getenv("MQTARGET_NATS_MONITORS")
	if pidfile == "" || servers == "" || monitors == "" {
		t.Skip("MQTARGET_NATS_KILL_PIDFILE, MQTARGET_NATS_TEST_SERVERS and MQTARGET_NATS_MONITORS are not set (see docs/nats.md)")
	}
	addr, mon := strings.Split(servers, ",")[0], strings.Split(monitors, ",")[0]
	p := open(t, []string{addr}, nil)
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := "itest.kill." + hex.EncodeToString(b[:])
	var acked, failed atomic.Int64
	var wg sync.WaitGroup
	var seq atomic.Int64
	publish := func() {
		n := seq.Add(1)
		wg.Add(1)
		err := p.PublishAsync(0, topic, fmt.Appendf(nil, "m%d", n), func(err error) {
			defer wg.Done()
			switch {
			case err == nil:
				acked.Add(1)
			case errors.Is(err, publishers.ErrUnavailable), errors.Is(err, publishers.ErrTimeout):
				failed.Add(1)
			default:
				t.Errorf("done: %v, want nil, unavailable or timeout", err)
			}
		})
		if err != nil {
			wg.Done()
			if !errors.Is(err, publishers.ErrUnavailable) {
				t.Errorf("PublishAsync: %v", err)
			}
			failed.Add(1)
		}
	}
	if err := p.Publish(ctx(t), 0, topic, []byte("first")); err != nil { // the stream exists
		t.Fatal(err)
	}
	acked.Add(1)
	for range 2000 {
		publish()
	}
	pid := readPID(t, pidfile)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 2000 { // during and after the kill
		publish()
	}
	start := exec.Command("../../scripts/nats.sh", "start")
	start.Stderr = os.Stderr
	testwait.For(t, 10*time.Second, "the killed server gone", func() bool { return syscall.Kill(pid, 0) != nil })
	if err := start.Run(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 15*time.Second, "publishing again", func() error {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return p.Publish(c, 0, topic, []byte("after"))
	})
	acked.Add(1)
	wg.Wait()
	got := jszMessages(t, mon, nats.StreamName(topic))
	t.Logf("published %d: %d acknowledged, %d failed; the restarted server holds %d (%d stored without a PubAck)",
		seq.Load()+2, acked.Load(), failed.Load(), got, int64(got)-acked.Load())
	if int64(got) < acked.Load() {
		t.Errorf("the server holds %d messages, %d were acknowledged: a kill -9 lost acknowledged messages", got, acked.Load())
	}
	if c := p.ConnCounts(0); c.Reopened < 1 {
		t.Errorf("ConnCounts = %+v, want a reconnect", c)
	}
}
