package kafka_test

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// BenchmarkPublish: mqtarget's Publish (one record, acks=all, answered by the partition's leader)
// against franz-go's ProduceSync with the same producer settings, from GOMAXPROCS×4 goroutines each
// waiting for its answer, against the cluster MQTARGET_KAFKA_TEST_BROKERS names. Read allocs/op (the
// client side only: the broker is another process) and ns/op side by side in one run.
func BenchmarkPublish(b *testing.B) {
	c := integrationConfig(b)
	body := make([]byte, 100)
	b.Run("mqtarget", func(b *testing.B) {
		p := newPublisher(b, c)
		defer p.Close()
		topic := freshTopic("bench_mqt")
		if err := p.Publish(b.Context(), 0, topic, body); err != nil {
			b.Fatal(err)
		}
		pt.BenchParallel(b, func(ctx context.Context) error { return p.Publish(ctx, 0, topic, body) })
	})
	b.Run("franz-go", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		topic := freshTopic("bench_kgo")
		if _, err := kadm.NewClient(cl).CreateTopic(b.Context(), 1, 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			b.Fatal(err)
		}
		pt.BenchParallel(b, func(ctx context.Context) error {
			return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: body}).FirstErr()
		})
	})
}
