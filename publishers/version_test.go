package publishers_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
	"github.com/mqtarget/mqtarget/publishers/stomp"
)

// TestBrokerVersion: a handshake tells what the broker runs (nsqd's IDENTIFY answer, the STOMP
// CONNECTED server header), per host, and the metrics decorator passes it on; nothing before.
func TestBrokerVersion(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	nsqd, err := nsq.StartNSQD(1, 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsqd.Close() })
	stompd, err := stomp.StartServer(1, 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stompd.Close() })

	nc := nsq.DefaultConfig()
	nc.Hosts = nsqd.TCPAddrs()
	nsq, err := nsq.New(nc, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsq.Close() })
	sc := stomp.DefaultConfig()
	sc.Hosts = stompd.Addrs()
	stomp, err := stomp.New(sc, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stomp.Close() })

	m := publishers.NewMetrics(prometheus.NewRegistry(), nil)
	for _, tc := range []struct {
		name string
		pub  publishers.Publisher
		want string
	}{
		{"nsq", nsq, "nsqd 1.3.0"},
		{"stomp", stomp, "stompd/"}, // go-stomp's server names itself so
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip := m.Instrument(tc.name, tc.pub)
			v := ip.(publishers.BrokerVersioner)
			if got := v.BrokerVersion(0); got != "" {
				t.Errorf("before any handshake: %q, want empty", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := ip.Ping(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if got := v.BrokerVersion(0); !strings.HasPrefix(got, tc.want) {
				t.Errorf("after a ping: %q, want %q…", got, tc.want)
			}
			if got := v.BrokerVersion(1); got != "" {
				t.Errorf("host out of range: %q, want empty", got)
			}
		})
	}
}
