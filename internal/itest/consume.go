package itest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// collect consumes topic with cons, keeping the bodies that came from host, until want of them arrived
// (then for grace more, so extras and duplicates that follow are seen too) or the deadline passed. It
// consumes with the product's own consumers: the suite checks delivery with what users run.
func collect(t testing.TB, cons publishers.Consumer, host int, topic string, want int, grace, deadline time.Duration) [][]byte {
	t.Helper()
	if want <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var (
		mu  sync.Mutex
		got [][]byte
	)
	enough := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		ended <- cons.Consume(ctx, topic, func(d publishers.Delivery) {
			if d.Host != host {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d.Body)
			if len(got) == want {
				close(enough)
			}
		})
	}()
	select {
	case <-enough:
		select {
		case <-time.After(grace):
		case <-ctx.Done():
		}
	case <-ctx.Done():
	case err := <-ended:
		t.Fatalf("consuming %s: %v", topic, err)
	}
	cancel()
	if err := <-ended; err != nil {
		t.Fatalf("consuming %s: %v", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}

// testLogger logs to t, shown only for failing tests.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
