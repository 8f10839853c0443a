package rocketmq

import (
	"context"
	"sync/atomic"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/mqtarget/mqtarget/publishers"
)

// countingProducer counts the sends handed to the client: each one that finds no connection dials.
type countingProducer struct {
	rocketmq.Producer
	n *atomic.Int64
}

func (c countingProducer) SendAsync(ctx context.Context, cb func(context.Context, *primitive.SendResult, error), msgs ...*primitive.Message) error {
	c.n.Add(1)
	return c.Producer.SendAsync(ctx, cb, msgs...)
}

// CountClientSends makes p's producers count the sends handed to rocketmq-client-go into the result.
func CountClientSends(p *Publisher) *atomic.Int64 {
	n := &atomic.Int64{}
	for _, s := range p.slots {
		pr := s.cur.Load()
		pr.p = countingProducer{pr.p, n}
	}
	return n
}

// FillAsyncWaiting counts as many async publishes as may wait on host as waiting, as if they were.
func FillAsyncWaiting(p publishers.Publisher, host int) {
	var w *publishers.AsyncWaiting
	switch p := p.(type) {
	case *Native:
		w = &p.native.conns[host].waiting
	case *Publisher:
		w = &p.asyncWaiting[host]
	}
	for w.Take() {
	}
}
