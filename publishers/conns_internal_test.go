package publishers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type deadLink struct{ dead bool }

func (l *deadLink) Dead() bool { return l.dead }
func (l *deadLink) Close()     {}

// TestPoolConnCounts: first connections, reconnects after a connection broke and failed dials are
// counted per host, and the host's reachability changes are logged once each.
func TestPoolConnCounts(t *testing.T) {
	var logs bytes.Buffer
	var links []*deadLink
	var refuse error
	p := NewPool("test", []string{"a:1", "b:2"}, 2, func(context.Context, string) (*deadLink, error) {
		if refuse != nil {
			return nil, refuse
		}
		l := &deadLink{}
		links = append(links, l)
		return l, nil
	})
	p.Log = slog.New(slog.NewTextHandler(&logs, nil))
	p.Backoff.Healthy = 0 // connections breaking young are redial_test.go's
	ctx := context.Background()
	get := func() error { _, err := p.Get(ctx, 0); return err }
	want := func(step string, c ConnCounts) {
		t.Helper()
		if got := p.ConnCounts(0); got != c {
			t.Errorf("%s: %+v, want %+v", step, got, c)
		}
	}

	for range 4 { // two slots: two connections, then both reused
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	settle(p) // the second slot's dial may run on while the first slot serves
	want("first connections", ConnCounts{Opened: 2})

	for _, l := range links {
		l.dead = true
	}
	refuse = errors.New("connection refused")
	for range 4 { // each slot dials once, then fails fast within its backoff
		if get() == nil {
			t.Fatal("get succeeded with every dial refused")
		}
	}
	want("host down", ConnCounts{Opened: 2, DialFailures: 2})

	refuse = nil
	p.conns[0].redial.retryAt = time.Time{} // the backoff is over
	if err := get(); err != nil {
		t.Fatal(err)
	}
	want("host back", ConnCounts{Opened: 3, Reopened: 1, DialFailures: 2})
	if got := p.ConnCounts(1); got != (ConnCounts{}) {
		t.Errorf("host 1, never used: %+v", got)
	}
	if got := p.ConnCounts(7); got != (ConnCounts{}) {
		t.Errorf("host out of range: %+v", got)
	}
	out := logs.String()
	if strings.Count(out, "broker host unreachable: cannot connect") != 1 || strings.Count(out, "broker host reachable again: connected") != 1 ||
		!strings.Contains(out, "host=a:1") {
		t.Errorf("want one line when host a:1 went down and one when it came back:\n%s", out)
	}
}
