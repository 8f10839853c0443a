// Command rmqdirect measures RocketMQ sync sends from Go without HTTP, to split mqtarget's gap to the
// Java benchmark Producer (scripts/bench-rocketmq.sh, docs/benchmarks.md) into what rocketmq-client-go
// costs and what the HTTP side adds. -c senders each send 100-byte messages one after the other to the
// topic's queues on one broker, either through mqtarget's publisher (-mode publisher) or through a bare
// rocketmq-client-go producer (-mode client). With -cpuprofile it writes a CPU profile of the measured part.
//
// It prints closedloop's result line (with client_us, the process's CPU time per answered send in the
// measured window, in microseconds).
//
//	go run ./cmd/bench-rmqdirect -namesrv 127.0.0.1:9876 -topic mqtarget-bench -c 16
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"sync/atomic"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
	mqrocketmq "github.com/mqtarget/mqtarget/publishers/rocketmq"
)

type options struct {
	closedloop.Common
	namesrv, topic, broker, mode, cpuprofile, client string
	producers                                        int
}

func main() {
	var o options
	o.Register(flag.CommandLine)
	flag.StringVar(&o.namesrv, "namesrv", "127.0.0.1:9876", "name server host:port")
	flag.StringVar(&o.topic, "topic", "mqtarget-bench", "topic (it must exist on -broker)")
	flag.StringVar(&o.broker, "broker", "broker-a", "broker name whose queues get the messages")
	flag.StringVar(&o.mode, "mode", "publisher", "publisher (mqtarget's RocketMQ publisher) or client (bare rocketmq-client-go)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured part here")
	flag.StringVar(&o.client, "client", mqrocketmq.DefaultConfig().Client, "the publisher's send path (rocketmq.client): native or library")
	flag.IntVar(&o.producers, "producers", mqrocketmq.DefaultConfig().Producers, "producer instances")
	flag.Parse()
	switch {
	case o.producers < 1 || o.producers > 64:
		fmt.Fprintln(os.Stderr, "rmqdirect: -producers: must be 1..64, got", o.producers)
		os.Exit(2)
	case o.mode != "publisher" && o.mode != "client":
		fmt.Fprintf(os.Stderr, "rmqdirect: -mode: publisher or client, got %q\n", o.mode)
		os.Exit(2)
	}
	os.Exit(closedloop.Main("rmqdirect", o.Common, o.open, os.Stdout, os.Stderr))
}

// sendFunc sends one message and waits for the broker's answer.
type sendFunc func(ctx context.Context, body []byte) error

func (o options) open(c closedloop.Common) (closedloop.Session, error) {
	send, closeFn, err := sender(o)
	if err != nil {
		return closedloop.Session{}, err
	}
	body := c.Body()
	var prof *os.File
	var profErr error
	return closedloop.Session{
		Send:  c.Timed(func(ctx context.Context, _ int) error { return send(ctx, body) }),
		Close: closeFn,
		Window: func(start bool) {
			switch {
			case o.cpuprofile == "":
			case start:
				if prof, profErr = os.Create(o.cpuprofile); profErr == nil {
					profErr = pprof.StartCPUProfile(prof)
				}
			case profErr == nil:
				pprof.StopCPUProfile()
				profErr = prof.Close()
			}
		},
		Extra: func(closedloop.Result) string {
			if profErr != nil {
				fmt.Fprintln(os.Stderr, "rmqdirect: -cpuprofile:", profErr)
			}
			return ""
		},
	}, nil
}

func sender(o options) (sendFunc, func(), error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if o.mode == "publisher" {
		c := mqrocketmq.DefaultConfig()
		c.NameServers = []string{o.namesrv}
		c.Producers = o.producers
		c.Client = o.client
		p, err := mqrocketmq.New(c, nil, log)
		if err != nil {
			return nil, nil, err
		}
		host := slices.IndexFunc(p.Hosts(), func(h string) bool { return len(h) > len(o.broker) && h[:len(o.broker)+1] == o.broker+"@" })
		if host < 0 {
			_ = p.Close()
			return nil, nil, fmt.Errorf("broker %s not among %v", o.broker, p.Hosts())
		}
		return func(ctx context.Context, body []byte) error { return p.Publish(ctx, host, o.topic, body) },
			func() { _ = p.Close() }, nil
	}
	rlog.SetLogLevel("error")
	var prods []rocketmq.Producer
	closeAll := func() {
		for _, p := range prods {
			_ = p.Shutdown()
		}
	}
	for i := range o.producers {
		p, err := rocketmq.NewProducer(
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{o.namesrv})),
			producer.WithGroupName("rmqdirect"),
			producer.WithInstanceName(fmt.Sprintf("rmqdirect-%d-%d", os.Getpid(), i)),
			producer.WithRetry(0),
			producer.WithQueueSelector(brokerQueues{o.broker}),
		)
		if err == nil {
			err = p.Start()
		}
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		prods = append(prods, p)
	}
	var next atomic.Uint32
	return func(ctx context.Context, body []byte) error {
		res, err := prods[int(next.Add(1))%len(prods)].SendSync(ctx, primitive.NewMessage(o.topic, body))
		if err == nil && res.Status != primitive.SendOK {
			err = fmt.Errorf("send status %d", res.Status)
		}
		return err
	}, closeAll, nil
}

// brokerQueues picks the queues of one broker, round-robin.
type brokerQueues struct{ name string }

var rr atomic.Uint32

func (b brokerQueues) Select(_ *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	var mine []*primitive.MessageQueue
	for _, mq := range mqs {
		if mq.BrokerName == b.name {
			mine = append(mine, mq)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	return mine[int(rr.Add(1))%len(mine)]
}
