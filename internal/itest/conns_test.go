package itest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/serve"
	"github.com/mqtarget/mqtarget/internal/testwait"
)

// lockedBuffer collects log output written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), substr)
}

// metricValue reads one sample from /metrics' text, by its name and labels as exposed.
func metricValue(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}

// TestConnectionCounts stops and restarts a real nsqd under mqtarget: the connection, reconnect and
// dial-failure counters move, and the outage is logged once when it starts and once when it ends,
// however many requests fail in between.
func TestConnectionCounts(t *testing.T) {
	proc := StartNSQDProc(t, NSQDBin(t))
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.PublishTimeout = PublishTimeout
	cfg.ShutdownLameDuck = 0
	cfg.NSQ.Hosts = []string{proc.TCPAddr}
	var logs lockedBuffer
	a, err := serve.Start(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatalf("serve.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
		if t.Failed() {
			t.Logf("mqtarget's log:\n%s", logs.b.String())
		}
	})
	tg := &Target{App: a, Base: "http://" + a.Addr()}
	series := func(name string) string {
		return fmt.Sprintf(`%s{broker="nsq",host=%q}`, name, proc.TCPAddr)
	}
	const (
		opened   = "mqtarget_broker_connections_total"
		reopened = "mqtarget_broker_reconnects_total"
		failed   = "mqtarget_broker_dial_failures_total"
		downLine = `msg="broker host unreachable: cannot connect" broker=nsq host=`
		upLine   = `msg="broker host reachable again: connected" broker=nsq host=`
	)

	for range 3 {
		if r := tg.Get(t, "/send1"); r.Status != http.StatusOK {
			t.Fatalf("/send1: %d %s", r.Status, r.Error)
		}
	}
	if o, r := metricValue(t, tg.Base, series(opened)), metricValue(t, tg.Base, series(reopened)); o != 1 || r != 0 {
		t.Fatalf("after 3 publishes: %v connections, %v reconnects; want 1 and 0", o, r)
	}

	proc.Stop(t)
	// Requests keep failing while the slot's redial backoff grows: several failed dials, one log line.
	requests := 0
	testwait.Until(t, 10*time.Second, "3 failed dials", func() error {
		requests++
		if r := tg.Get(t, "/send1"); r.Status != http.StatusServiceUnavailable {
			return fmt.Errorf("/send1 with nsqd stopped: %d, want 503", r.Status)
		}
		if n := metricValue(t, tg.Base, series(failed)); n < 3 {
			return fmt.Errorf("%v dial failures", n)
		}
		return nil
	})
	if n := logs.count(downLine); n != 1 {
		t.Errorf("%d requests failed, logged %d times as unreachable; want once", requests, n)
	}
	if n := logs.count(upLine); n != 0 {
		t.Errorf("logged reachable %d times while nsqd was stopped", n)
	}

	proc.Start(t)
	testwait.Until(t, 10*time.Second, "/send1 through the restarted nsqd", func() error {
		if r := tg.Get(t, "/send1"); r.Status != http.StatusOK {
			return fmt.Errorf("/send1: %d %s", r.Status, r.Error)
		}
		return nil
	})
	if o, r := metricValue(t, tg.Base, series(opened)), metricValue(t, tg.Base, series(reopened)); o != 2 || r != 1 {
		t.Errorf("after the restart: %v connections, %v reconnects; want 2 and 1", o, r)
	}
	if d, u := logs.count(downLine), logs.count(upLine); d != 1 || u != 1 {
		t.Errorf("logged unreachable %d times and reachable again %d times; want once each", d, u)
	}
}
