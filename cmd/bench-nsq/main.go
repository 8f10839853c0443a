// Command bench-nsq is the NSQ direct client of the tail anchor (scripts/bench-nsq.sh, run by
// scripts/bench.sh): what a plain Go client gets from nsqd without mqtarget in between. Each of -c
// senders has its own go-nsq Producer (a Producer's Publish waits for its answer, so one per sender is
// what gives concurrency, as for the other anchors' one-answer-at-a-time clients) and publishes 100-byte messages to -topic, waiting for
// nsqd's OK before the next.
//
// It runs -warmup, then measures for -d and prints closedloop's result line.
//
//	go run ./cmd/bench-nsq -nsqd 127.0.0.1:4150 -topic anchor -c 16
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"

	"github.com/nsqio/go-nsq"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
)

// validTopic is nsqd's rule for topic names.
var validTopic = regexp.MustCompile(`^[.a-zA-Z0-9_-]{1,64}(#ephemeral)?$`)

func main() {
	var c closedloop.Common
	c.Register(flag.CommandLine)
	nsqd := flag.String("nsqd", "127.0.0.1:4150", "nsqd TCP host:port")
	topic := flag.String("topic", "mqtarget-anchor", "topic")
	flag.Parse()
	if !validTopic.MatchString(*topic) {
		fmt.Fprintf(os.Stderr, "bench-nsq: -topic: 1..64 of [.a-zA-Z0-9_-], got %q\n", *topic)
		os.Exit(2)
	}
	os.Exit(closedloop.Main("bench-nsq", c, func(c closedloop.Common) (closedloop.Session, error) {
		return open(c, *nsqd, *topic)
	}, os.Stdout, os.Stderr))
}

func open(c closedloop.Common, addr, topic string) (closedloop.Session, error) {
	prods := make([]*nsq.Producer, c.Senders)
	closeAll := func() {
		for _, p := range prods {
			if p != nil {
				p.Stop()
			}
		}
	}
	for i := range prods {
		p, err := nsq.NewProducer(addr, nsq.NewConfig())
		if err == nil {
			p.SetLogger(log.New(io.Discard, "", 0), nsq.LogLevelError)
			err = p.Ping()
		}
		if err != nil {
			closeAll()
			return closedloop.Session{}, fmt.Errorf("producer %d: %w", i, err)
		}
		prods[i] = p
	}
	body := c.Body()
	return closedloop.Session{
		Send:  func(i int) error { return prods[i].Publish(topic, body) },
		Close: closeAll,
	}, nil
}
