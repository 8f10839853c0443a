package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
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

// BenchmarkEndpoints measures the handler path (parsing, payload, metrics, reply) per request, with
// the metrics decorator in place as in production. /healthz is the floor: routing, HTTP metrics and a
// constant reply.
func BenchmarkEndpoints(b *testing.B) {
	reg := prometheus.NewRegistry()
	pub := publishers.NewMetrics(reg, nil).Instrument("nsq", nopPub{hosts: []string{"a:1", "b:1", "c:1"}})
	srv := handlers.New(handlers.Options{
		Publishers:        map[string]publishers.Publisher{"nsq": pub},
		DefaultBroker:     "nsq",
		Topic:             "t",
		Topic2:            "t2",
		MaxDistinctTopics: 1000, // the default, as in production
		MessageSize:       100,
		MaxMessageSize:    1 << 20,
		PublishTimeout:    time.Second,
		AsyncLimit:        1000,
		Registry:          reg,
		Log:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	for _, path := range []string{"/healthz", "/send1", "/send2", "/send2Topic", "/sendAsync", "/sendAsyncWait", "/send3Host", "/send1?size=1024&topics=10"} {
		b.Run(path, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, "http://x"+path, nil)
			w := &statusWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				srv.ServeHTTP(w, req)
			}
		})
	}
}

// BenchmarkNSQ measures the /send1 and /send2 hot path against a real nsqd running in this process
// (publishers/nsq/embedded.go): handler, metrics decorator, NSQ publisher, TCP round trip to nsqd and nsqd's
// own PUB/MPUB handling, until the acknowledgement. "serial" is one request at a time (latency bound);
// "c50" runs 50 goroutines at once, like wrk -c50, and shows what the connection code overlaps.
//
// The topic is ephemeral, so nsqd keeps up to its in-memory queue and drops the rest instead of
// writing it to disk (its put path is the same up to there); nsqd's message_count is checked after
// every run, so a benchmark that lost messages fails instead of reporting a number.
func BenchmarkNSQ(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	nsqd, err := nsq.StartNSQD(1, 1<<20, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = nsqd.Close() })
	cfg := nsq.DefaultConfig()
	cfg.Hosts = nsqd.TCPAddrs()
	nsq, err := nsq.New(cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = nsq.Close() })
	reg := prometheus.NewRegistry()
	srv := handlers.New(handlers.Options{
		Publishers:     map[string]publishers.Publisher{"nsq": publishers.NewMetrics(reg, nil).Instrument("nsq", nsq)},
		DefaultBroker:  "nsq",
		Topic:          "bench#ephemeral",
		Topic2:         "bench2#ephemeral",
		MessageSize:    100,
		MaxMessageSize: 1 << 20,
		PublishTimeout: 5 * time.Second,
		AsyncLimit:     1000,
		Registry:       reg,
		Log:            log,
	})
	stats := "http://" + nsqd.HTTPAddrs()[0] + "/stats?format=json&topic=" + url.QueryEscape("bench#ephemeral")

	for _, tc := range []struct {
		path     string
		messages int // per request
	}{
		{"/send1", 1},
		{"/send2", 2},
	} {
		for _, conc := range []int{1, 50} {
			name := tc.path + "/serial"
			if conc > 1 {
				name = fmt.Sprintf("%s/c%d", tc.path, conc)
			}
			b.Run(name, func(b *testing.B) {
				before := topicCount(b, stats)
				var requests atomic.Int64
				serve := func(loop func() bool) {
					req, _ := http.NewRequest(http.MethodGet, "http://x"+tc.path, nil)
					w := &statusWriter{h: http.Header{}}
					for loop() {
						srv.ServeHTTP(w, req)
						if w.status != http.StatusOK {
							b.Errorf("%s answered %d", tc.path, w.status)
							return
						}
						requests.Add(1)
					}
				}
				b.ReportAllocs()
				if conc == 1 {
					serve(b.Loop)
				} else {
					// RunParallel starts SetParallelism × GOMAXPROCS goroutines.
					b.SetParallelism((conc + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
					b.RunParallel(func(pb *testing.PB) { serve(pb.Next) })
				}
				b.StopTimer()
				if got, want := topicCount(b, stats)-before, requests.Load()*int64(tc.messages); got != want {
					b.Fatalf("nsqd counted %d new messages, %d acknowledged", got, want)
				}
			})
		}
	}
}

// statusWriter is a minimal http.ResponseWriter that keeps the status code, so a recorder's own
// allocations don't count.
type statusWriter struct {
	h      http.Header
	status int
}

func (w *statusWriter) Header() http.Header         { return w.h }
func (w *statusWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *statusWriter) WriteHeader(code int)        { w.status = code }

// topicCount returns nsqd's message_count of the one topic statsURL asks for (0 before it exists).
func topicCount(b *testing.B, statsURL string) int64 {
	b.Helper()
	resp, err := http.Get(statsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Topics []struct {
			MessageCount int64 `json:"message_count"`
		} `json:"topics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		b.Fatalf("nsqd stats: %v", err)
	}
	var n int64
	for _, t := range st.Topics {
		n += t.MessageCount
	}
	return n
}
