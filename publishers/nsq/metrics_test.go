package nsq_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
)

// TestConnMetrics: the counts are exported per broker and host for publishers that keep them.
func TestConnMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := publishers.NewMetrics(reg, nil)
	pub, err := nsq.New(nsq.Config{Hosts: []string{"127.0.0.1:1"}, ProducersPerHost: 1, DialTimeout: time.Second}, slog.New(slog.DiscardHandler))
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
