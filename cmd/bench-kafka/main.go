// Command bench-kafka is the Kafka anchor of docs/benchmarks.md (scripts/bench-kafka.sh): what a plain Go
// client gets from a Kafka cluster without mqtarget in between. It creates -topic (1 partition,
// replication factor 1, unless it exists) with kadm, then -c senders share one franz-go client (as a Go
// service would) and each produces 100-byte records to partition 0 with ProduceSync, acks=all (-acks),
// waiting for the produce response before the next. The client's producer settings are franz-go's
// defaults (idempotent) but for linger 0 and no compression, as mqtarget's publisher sets them.
//
// It runs -warmup, then measures for -d and prints closedloop's result line.
//
//	go run ./cmd/bench-kafka -brokers 127.0.0.1:9092 -topic anchor -c 16
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
)

func main() {
	var c closedloop.Common
	c.Register(flag.CommandLine)
	brokers := flag.String("brokers", "127.0.0.1:9092", "seed brokers host:port, comma-separated")
	topic := flag.String("topic", "mqtarget-anchor", "topic (created with 1 partition when missing)")
	acks := flag.String("acks", "all", "all or leader")
	flag.Parse()
	switch {
	case *topic == "" || len(*topic) > 249:
		fmt.Fprintf(os.Stderr, "bench-kafka: -topic: 1..249 characters, got %q\n", *topic)
		os.Exit(2)
	case *acks != "all" && *acks != "leader":
		fmt.Fprintf(os.Stderr, "bench-kafka: -acks: all or leader, got %q\n", *acks)
		os.Exit(2)
	}
	os.Exit(closedloop.Main("bench-kafka", c, func(c closedloop.Common) (closedloop.Session, error) {
		return open(c, strings.Split(*brokers, ","), *topic, *acks)
	}, os.Stdout, os.Stderr))
}

func open(c closedloop.Common, brokers []string, topic, acks string) (closedloop.Session, error) {
	ack := kgo.AllISRAcks()
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(c.Timeout)}
	if acks == "leader" {
		ack = kgo.LeaderAck()
		opts = append(opts, kgo.DisableIdempotentWrite()) // franz-go's idempotent producer requires acks=all
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequiredAcks(ack))...)
	if err != nil {
		return closedloop.Session{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		err = nil
	}
	if err != nil {
		cl.Close()
		return closedloop.Session{}, fmt.Errorf("creating topic %s: %w", topic, err)
	}
	body := c.Body()
	return closedloop.Session{
		Send: c.Timed(func(ctx context.Context, _ int) error {
			return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: body}).FirstErr()
		}),
		Close: cl.Close,
	}, nil
}
