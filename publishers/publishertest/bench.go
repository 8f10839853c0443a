package publishertest

import (
	"context"
	"testing"
	"time"
)

// BenchParallel runs b.N publishes from GOMAXPROCS×4 goroutines, each waiting for its answer under a
// 5 s deadline, reporting allocations: the broker packages' BenchmarkPublish, mqtarget's publisher
// beside the bare client library, side by side in one run.
func BenchParallel(b *testing.B, publish func(context.Context) error) {
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := publish(ctx); err != nil {
				b.Error(err)
			}
			cancel()
		}
	})
}
