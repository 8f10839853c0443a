package publishertest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/wire"
)

// FakeTarget is a broker's publisher and the fake broker it runs against.
type FakeTarget struct {
	Broker   string // the registry name, for metrics labels
	Fake     func(testing.TB, Misbehaviour) Fake
	Open     func(addrs []string, log *slog.Logger) (publishers.Publisher, error)
	Features FakeFeatures
}

// RunFakeTarget runs RunFakes for tc.
func RunFakeTarget(t *testing.T, tc FakeTarget) {
	RunFakes(t, tc.Features, tc.Fake, func(t testing.TB, fake Fake) publishers.Publisher {
		p, err := tc.Open(fake.Addrs(), Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// syncBuffer collects log output from the publisher's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// RunProtocolErrors: against a broker that answers garbage: every publish fails as unavailable (503) with the protocol violation
// named, mqtarget_protocol_errors_total{broker,host} counts the violations, and the log has one line
// for them per host, however many connections the broker broke.
func RunProtocolErrors(t *testing.T, tc FakeTarget) {
	if tc.Features.NoProtocolErrors != "" {
		t.Skip(tc.Features.NoProtocolErrors)
	}
	{
		{
			fake := tc.Fake(t, Garbage)
			defer fake.Close()
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			raw, err := tc.Open(fake.Addrs(), log)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			p := publishers.NewMetrics(reg, nil).Instrument(tc.Broker, raw)
			defer p.Close()
			const n = 5
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := p.Publish(ctx, 0, "protocol", []byte("garbage answered"))
				cancel()
				if !errors.Is(err, publishers.ErrUnavailable) || !errors.Is(err, wire.ErrProtocol) {
					t.Errorf("publish %d: %v, want ErrUnavailable for a protocol violation", i, err)
				}
			}
			counted := raw.(publishers.ProtocolErrorCounter).ProtocolErrors(0)
			if counted == 0 || counted > n {
				t.Errorf("ProtocolErrors(0) = %d after %d publishes answered with garbage, want 1..%d", counted, n, n)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var exported float64
			found := false
			for _, mf := range mfs {
				if mf.GetName() != "mqtarget_protocol_errors_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					l := labelsOf(m)
					if l["broker"] == tc.Broker && l["host"] == raw.Hosts()[0] {
						exported, found = m.GetCounter().GetValue(), true
					}
				}
			}
			if !found || exported != float64(counted) {
				t.Errorf("mqtarget_protocol_errors_total{broker=%q,host=%q} = %v (exported: %v), want %d", tc.Broker, raw.Hosts()[0], exported, found, counted)
			}
			if got := strings.Count(logs.String(), "broke the protocol"); got != 1 {
				t.Errorf("%d log lines about the protocol violations, want 1:\n%s", got, logs.String())
			}
			if strings.Contains(logs.String(), "connection lost with commands pending") {
				t.Errorf("each violation logged again as a lost connection:\n%s", logs.String())
			}
		}
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
