package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/publishers"
)

// nopPub acknowledges everything at once, so the benchmarks measure mqtarget's own per-request cost.
type nopPub struct{ hosts []string }

func (p nopPub) Publish(context.Context, int, string, []byte) error        { return nil }
func (p nopPub) PublishBatch(context.Context, int, string, [][]byte) error { return nil }
func (p nopPub) PublishAsync(_ int, _ string, _ []byte, done func(error)) error {
	done(nil)
	return nil
}
func (p nopPub) Hosts() []string                 { return p.hosts }
func (p nopPub) Ping(context.Context, int) error { return nil }
func (p nopPub) ValidateTopic(string) error      { return nil }
func (p nopPub) Close() error                    { return nil }

// discard is a minimal http.ResponseWriter, so the recorder's own allocations don't count.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkEndpoints measures the handler path (parsing, payload, metrics, reply) per request, with
// the metrics decorator in place as in production.
func BenchmarkEndpoints(b *testing.B) {
	reg := prometheus.NewRegistry()
	pub := publishers.NewMetrics(reg).Instrument("nsq", nopPub{hosts: []string{"a:1", "b:1", "c:1"}})
	srv := handlers.New(handlers.Options{
		Publishers:     map[string]publishers.Publisher{"nsq": pub},
		DefaultBroker:  "nsq",
		Topic:          "t",
		Topic2:         "t2",
		MessageSize:    100,
		MaxMessageSize: 1 << 20,
		PublishTimeout: time.Second,
		AsyncLimit:     1000,
		Registry:       reg,
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	for _, path := range []string{"/send1", "/send2", "/send2Topic", "/sendAsync", "/send3Host", "/send1?size=1024&topics=10"} {
		b.Run(path, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, "http://x"+path, nil)
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				srv.ServeHTTP(w, req)
			}
		})
	}
}
