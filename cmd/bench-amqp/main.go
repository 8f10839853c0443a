// Command bench-amqp is the AMQP 0-9-1 anchor of docs/benchmarks.md (scripts/bench-amqp.sh): what a plain
// Go client gets from RabbitMQ without mqtarget in between, beside RabbitMQ's own PerfTest. It declares
// the durable queue -topic, then -c senders, each on its own channel in confirm mode (one connection;
// -connections and -per-channel give mqtarget's shape instead: the senders share one channel per
// connection), publish persistent 100-byte messages to it through the default exchange (routing key = queue, as
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
	conns := flag.Int("connections", 1, "connections, the senders spread over them in turn (1..64)")
	perChannel := flag.Int("per-channel", 1, "senders sharing one confirm-mode channel (1..4096): mqtarget's shape is one channel per connection")
	flag.Parse()
	bad := func(f, format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench-amqp: -%s: "+format+"\n", append([]any{f}, args...)...)
		os.Exit(2)
	}
	switch {
	case *topic == "" || len(*topic) > 255:
		bad("topic", "1..255 bytes, got %q", *topic)
	case *conns < 1 || *conns > 64:
		bad("connections", "1..64, got %d", *conns)
	case *perChannel < 1 || *perChannel > 4096:
		bad("per-channel", "1..4096, got %d", *perChannel)
	}
	os.Exit(closedloop.Main("bench-amqp", c, func(c closedloop.Common) (closedloop.Session, error) {
		return open(c, *url, *topic, *conns, *perChannel)
	}, os.Stdout, os.Stderr))
}

var errNack = errors.New("the broker nacked the publish")

// open dials conns connections and opens a confirm-mode channel for every perChannel senders; sender i
// uses channel i/perChannel, and channel k is on connection k mod conns.
func open(c closedloop.Common, url, queue string, conns, perChannel int) (closedloop.Session, error) {
	var cs []*amqp.Connection
	closeAll := func() {
		for _, conn := range cs {
			_ = conn.Close()
		}
	}
	for range conns {
		conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(c.Timeout)})
		if err != nil {
			closeAll()
			return closedloop.Session{}, err
		}
		cs = append(cs, conn)
	}
	chans := make([]*amqp.Channel, (c.Senders+perChannel-1)/perChannel)
	for k := range chans {
		ch, err := cs[k%conns].Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		if err == nil && k == 0 {
			_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
		}
		if err != nil {
			closeAll()
			return closedloop.Session{}, fmt.Errorf("channel %d: %w", k, err)
		}
		chans[k] = ch
	}
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: c.Body()}
	return closedloop.Session{
		Send: c.Timed(func(ctx context.Context, i int) error {
			dc, err := chans[i/perChannel].PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
			if err != nil {
				return err
			}
			ok, err := dc.WaitContext(ctx)
			if err == nil && !ok {
				err = errNack
			}
			return err
		}),
		Close: closeAll,
	}, nil
}
