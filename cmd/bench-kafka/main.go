// Command bench-kafka is the Kafka anchor of docs/benchmarks.md (scripts/bench-kafka.sh): what a plain Go
// client gets from a Kafka cluster without mqtarget in between. It creates -topic (1 partition,
// replication factor 1, unless it exists) with kadm, then -c senders share one franz-go client (as a Go
// service would) and each produces 100-byte records to partition 0 with ProduceSync, acks=all (-acks),
// waiting for the produce response before the next. The client's producer settings are franz-go's
// defaults (idempotent) but for linger 0 and no compression, as mqtarget's publisher sets them.
//
// -mode publisher sends through mqtarget's own Kafka publisher (publishers/kafka, /send1's path without
// HTTP) instead, to the topic's partition led by the first broker: the difference between the two modes
// is what mqtarget's publisher costs over a plain client, and /send1 less this mode is the HTTP side.
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
	"log/slog"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
	mqkafka "github.com/mqtarget/mqtarget/publishers/kafka"
)

func main() {
	var c closedloop.Common
	c.Register(flag.CommandLine)
	brokers := flag.String("brokers", "127.0.0.1:9092", "seed brokers host:port, comma-separated")
	topic := flag.String("topic", "mqtarget-anchor", "topic (created with 1 partition when missing)")
	acks := flag.String("acks", "all", "all or leader")
	mode := flag.String("mode", "client", "client (a plain franz-go client) or publisher (mqtarget's publishers/kafka)")
	flag.Parse()
	switch {
	case *mode != "client" && *mode != "publisher":
		fmt.Fprintf(os.Stderr, "bench-kafka: -mode: client or publisher, got %q\n", *mode)
		os.Exit(2)
	case *topic == "" || len(*topic) > 249:
		fmt.Fprintf(os.Stderr, "bench-kafka: -topic: 1..249 characters, got %q\n", *topic)
		os.Exit(2)
	case *acks != "all" && *acks != "leader":
		fmt.Fprintf(os.Stderr, "bench-kafka: -acks: all or leader, got %q\n", *acks)
		os.Exit(2)
	}
	os.Exit(closedloop.Main("bench-kafka", c, func(c closedloop.Common) (closedloop.Session, error) {
		if *mode == "publisher" {
			return openPublisher(c, strings.Split(*brokers, ","), *topic, *acks)
		}
		return open(c, strings.Split(*brokers, ","), *topic, *acks)
	}, os.Stdout, os.Stderr))
}

// openPublisher: mqtarget's Kafka publisher as the serve side configures it (its defaults, publish_timeout
// = -timeout), publishing to host 0 as /send1 does.
func openPublisher(c closedloop.Common, brokers []string, topic, acks string) (closedloop.Session, error) {
	kc := mqkafka.DefaultConfig()
	kc.Brokers, kc.Acks, kc.PublishTimeout = brokers, acks, c.Timeout
	if err := kc.Validate("kafka"); err != nil {
		return closedloop.Session{}, err
	}
	p, err := mqkafka.New(kc, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return closedloop.Session{}, err
	}
	body := c.Body()
	return closedloop.Session{
		Send:  c.Timed(func(ctx context.Context, _ int) error { return p.Publish(ctx, 0, topic, body) }),
		Close: func() { _ = p.Close() },
	}, nil
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
