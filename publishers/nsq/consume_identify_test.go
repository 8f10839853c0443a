package nsq

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// TestConsumerAsksForNoOutputBuffer: the consumer's IDENTIFY asks nsqd not to buffer what it sends
// (output_buffer_size -1). By default nsqd holds a lone message in its output buffer until its
// 250 ms flush ticker fires: every round trip through the echo (two deliveries) took 200-230 ms on
// the embedded nsqd, against 0.4 ms for the first one.
func TestConsumerAsksForNoOutputBuffer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan map[string]any, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			body, ok := readIdentify(bufio.NewReader(c))
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			if ok && m["user_agent"] == "mqtarget" { // the consumer's own check (TLS, AUTH) first: it passes
				_, _ = c.Write([]byte{0, 0, 0, 6, 0, 0, 0, 0, 'O', 'K'})
				c.Close()
				continue
			}
			c.Close()
			if ok {
				got <- m
			}
			return
		}
	}()
	c := DefaultConfig()
	c.Hosts = []string{ln.Addr().String()}
	k, err := NewConsumer(c, publishers.ConsumerOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go func() { _ = k.Consume(ctx, "identify", func(publishers.Delivery) {}) }()
	select {
	case m := <-got:
		if m["output_buffer_size"] != float64(-1) {
			t.Errorf("IDENTIFY output_buffer_size %v, output_buffer_timeout %v: want output_buffer_size -1 (no buffering)", m["output_buffer_size"], m["output_buffer_timeout"])
		}
	case <-ctx.Done():
		t.Fatal("no IDENTIFY came")
	}
}
