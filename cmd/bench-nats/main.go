// Command bench-nats is the NATS anchor of docs/benchmarks.md (scripts/bench-nats.sh): what a plain Go
// client gets from a nats-server with JetStream, without mqtarget in between. It creates the stream of
// -topic as mqtarget does (named by publishers/nats.StreamName, subjects [topic], file storage), then -c senders on
// one nats.go connection (as a Go service shares its connection) each publish 100-byte messages with
// jetstream.Publish, waiting for the PubAck before the next.
//
// It runs -warmup, then measures for -d and prints closedloop's result line.
//
//	go run ./cmd/bench-nats -server 127.0.0.1:4222 -topic anchor -c 16
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
	mqnats "github.com/mqtarget/mqtarget/publishers/nats"
)

func main() {
	var c closedloop.Common
	c.Register(flag.CommandLine)
	server := flag.String("server", "127.0.0.1:4222", "nats-server host:port")
	topic := flag.String("topic", "mqtarget-anchor", "subject; its stream is named after it")
	flag.Parse()
	if *topic == "" || strings.ContainsAny(*topic, " \t*>") {
		fmt.Fprintf(os.Stderr, "bench-nats: -topic: a subject without spaces or wildcards, got %q\n", *topic)
		os.Exit(2)
	}
	os.Exit(closedloop.Main("bench-nats", c, func(c closedloop.Common) (closedloop.Session, error) {
		return open(c, *server, *topic)
	}, os.Stdout, os.Stderr))
}

func open(c closedloop.Common, server, topic string) (closedloop.Session, error) {
	nc, err := nats.Connect("nats://"+server, nats.Timeout(c.Timeout))
	if err != nil {
		return closedloop.Session{}, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: mqnats.StreamName(topic), Subjects: []string{topic}, Storage: jetstream.FileStorage})
		cancel()
	}
	if err != nil {
		nc.Close()
		return closedloop.Session{}, err
	}
	body := c.Body()
	return closedloop.Session{
		Send: c.Timed(func(ctx context.Context, _ int) error {
			_, err := js.Publish(ctx, topic, body)
			return err
		}),
		Close: nc.Close,
	}, nil
}
