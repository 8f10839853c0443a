package publishers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	p.backoff.Healthy = 0 // connections breaking young are redial_test.go's
	ctx := context.Background()
	get := func() error { _, err := p.get(ctx, 0); return err }
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

// TestConnMetrics: the counts are exported per broker and host for publishers that keep them.
func TestConnMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, nil)
	pub, err := NewNSQ(NSQConfig{Hosts: []string{"127.0.0.1:1"}, ProducersPerHost: 1, DialTimeout: time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ip := m.Instrument("nsq", pub)
	if ip.Publish(context.Background(), 0, "t", []byte("x")) == nil { // port 1: refused
		t.Fatal("publish to 127.0.0.1:1 succeeded")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "mqtarget_broker_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			got[mf.GetName()] += fmt.Sprintf("%v %v", mt.GetLabel(), mt.GetCounter().GetValue())
		}
	}
	labels := `[name:"broker" value:"nsq" name:"host" value:"127.0.0.1:1"]`
	for name, v := range map[string]int{"mqtarget_broker_connections_total": 0, "mqtarget_broker_reconnects_total": 0, "mqtarget_broker_dial_failures_total": 1} {
		if w := fmt.Sprintf("%s %d", labels, v); strings.Join(strings.Fields(got[name]), " ") != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
}
