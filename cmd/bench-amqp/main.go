// Command bench-amqp is the AMQP 0-9-1 anchor of docs/benchmarks.md (scripts/bench-amqp.sh): what a plain
// Go client gets from RabbitMQ without mqtarget in between, beside RabbitMQ's own PerfTest. It declares
// the durable queue -topic, then -c senders, each on its own channel in confirm mode (one connection),
// publish persistent 100-byte messages to it through the default exchange (routing key = queue, as
// mqtarget's amqp defaults do) and wait for the broker's confirm before the next.
//
// It runs -warmup, then measures for -d and prints closedloop's result line.
//
//	go run ./cmd/bench-amqp -url amqp://guest:guest@127.0.0.1:5672/ -topic anchor -c 16
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
)

func main() {
	var c closedloop.Common
	c.Register(flag.CommandLine)
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	topic := flag.String("topic", "mqtarget-anchor", "queue (declared durable)")
	flag.Parse()
	if *topic == "" || len(*topic) > 255 {
		fmt.Fprintf(os.Stderr, "bench-amqp: -topic: 1..255 bytes, got %q\n", *topic)
		os.Exit(2)
	}
	os.Exit(closedloop.Main("bench-amqp", c, func(c closedloop.Common) (closedloop.Session, error) {
		return open(c, *url, *topic)
	}, os.Stdout, os.Stderr))
}

var errNack = errors.New("the broker nacked the publish")

func open(c closedloop.Common, url, queue string) (closedloop.Session, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(c.Timeout)})
	if err != nil {
		return closedloop.Session{}, err
	}
	chans := make([]*amqp.Channel, c.Senders)
	for i := range chans {
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		if err == nil && i == 0 {
			_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
		}
		if err != nil {
			_ = conn.Close()
			return closedloop.Session{}, fmt.Errorf("channel %d: %w", i, err)
		}
		chans[i] = ch
	}
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: c.Body()}
	return closedloop.Session{
		Send: c.Timed(func(ctx context.Context, i int) error {
			dc, err := chans[i].PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
			if err != nil {
				return err
			}
			ok, err := dc.WaitContext(ctx)
			if err == nil && !ok {
				err = errNack
			}
			return err
		}),
		Close: func() { _ = conn.Close() },
	}, nil
}
