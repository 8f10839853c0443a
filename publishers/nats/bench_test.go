package nats_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqtarget/mqtarget/publishers/nats"
	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// BenchmarkPublish: mqtarget's JetStream publish (checked PubAcks, own reply subjects) against nats.go's
// jetstream.Publish on one in-process server, b.N publishes from GOMAXPROCS×4 goroutines each waiting
// for its PubAck; and mqtarget's core NATS publish (its round trip, the permission check after it)
// against nats.go's Publish and Flush. Read ns/op side by side in one run and allocs/op
// (docs/benchmarks.md, "NATS").
func BenchmarkPublish(b *testing.B) {
	e, err := nats.StartEmbedded(1, nats.EmbeddedOptions{MaxStore: 1 << 30}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	body := make([]byte, 100)
	b.Run("mqtarget", func(b *testing.B) {
		c := nats.DefaultConfig()
		c.Servers = e.Addrs()
		p, err := nats.New(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		ctx := context.Background()
		if err := p.Publish(ctx, 0, "bench-mqt", body); err != nil {
			b.Fatal(err)
		}
		publishertest.BenchParallel(b, func(ctx context.Context) error { return p.Publish(ctx, 0, "bench-mqt", body) })
	})
	b.Run("jetstream", func(b *testing.B) {
		nc, err := natsgo.Connect("nats://" + e.Addrs()[0])
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: nats.StreamName("bench-js"), Subjects: []string{"bench-js"}, Storage: jetstream.FileStorage}); err != nil {
			b.Fatal(err)
		}
		publishertest.BenchParallel(b, func(ctx context.Context) error { _, err := js.Publish(ctx, "bench-js", body); return err })
	})
	b.Run("mqtarget-core", func(b *testing.B) {
		c := nats.DefaultConfig()
		c.Servers, c.JetStream = e.Addrs(), false
		p, err := nats.New(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		publishertest.BenchParallel(b, func(ctx context.Context) error { return p.Publish(ctx, 0, "bench-core", body) })
	})
	b.Run("core", func(b *testing.B) {
		nc, err := natsgo.Connect("nats://" + e.Addrs()[0])
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		publishertest.BenchParallel(b, func(ctx context.Context) error {
			if err := nc.Publish("bench-core", body); err != nil {
				return err
			}
			return nc.FlushWithContext(ctx)
		})
	})
}
