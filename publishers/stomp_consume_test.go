package publishers

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

// A consumer takes as messages only MESSAGE frames of its subscription: a broker's MESSAGE for another
// subscription, or a RECEIPT it never asked for, ends the connection (redialled), nothing delivered.
func TestSTOMPConsumerBelievesOnlyItsSubscription(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for conn := 0; ; conn++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r, w := frame.NewReader(c), frame.NewWriter(c)
				for {
					f, err := r.Read()
					if err != nil {
						return
					}
					if f == nil {
						continue
					}
					switch f.Command {
					case frame.CONNECT:
						_ = w.Write(frame.New(frame.CONNECTED, frame.Version, "1.2"))
					case frame.SUBSCRIBE:
						sub := f.Header.Get(frame.Id)
						forged := frame.New(frame.MESSAGE, frame.Subscription, sub+"7", frame.Destination, "/queue/t", frame.MessageId, "1")
						forged.Body = []byte("forged")
						stray := frame.New(frame.RECEIPT, frame.ReceiptId, "bye")
						real := frame.New(frame.MESSAGE, frame.Subscription, sub, frame.Destination, "/queue/t", frame.MessageId, "2")
						real.Body = []byte("real")
						switch conn {
						case 0:
							_ = w.Write(forged)
						case 1:
							_ = w.Write(stray)
							_ = w.Write(real) // after the stray receipt: not to be taken
						default:
							_ = w.Write(real)
						}
					}
				}
			})
		}
	})
	c := DefaultSTOMPConfig()
	c.Hosts = []string{ln.Addr().String()}
	cons, err := NewSTOMPConsumer(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []string
	errc := make(chan error, 1)
	go func() {
		errc <- cons.Consume(ctx, "t", func(d Delivery) {
			mu.Lock()
			got = append(got, string(d.Body))
			n := len(got)
			mu.Unlock()
			if n > 0 && string(d.Body) == "real" {
				cancel()
			}
		})
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "real" {
		t.Errorf("delivered %q, want only the third connection's real message", got)
	}
}
