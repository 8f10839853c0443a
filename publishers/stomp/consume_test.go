package stomp

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/mqtarget/mqtarget/publishers"
)

// stompConsumeFake is a STOMP broker that answers CONNECT, and a SUBSCRIBE of its conn-th connection
// with what onSubscribe writes; consumeUntilReal runs a consumer against it until the message "real".
func stompConsumeFake(t *testing.T, onSubscribe func(conn int, sub string, c net.Conn, w *frame.Writer)) string {
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
						onSubscribe(conn, f.Header.Get(frame.Id), c, w)
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

func consumeUntilReal(t *testing.T, addr string) []string {
	c := DefaultConfig()
	c.Hosts = []string{addr}
	cons, err := NewConsumer(c, nil)
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
		errc <- cons.Consume(ctx, "t", func(d publishers.Delivery) {
			mu.Lock()
			got = append(got, string(d.Body))
			mu.Unlock()
			if string(d.Body) == "real" {
				cancel()
			}
		})
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}

func realMessage(sub string) *frame.Frame {
	real := frame.New(frame.MESSAGE, frame.Subscription, sub, frame.Destination, "/queue/t", frame.MessageId, "2")
	real.Body = []byte("real")
	return real
}

// A consumer takes as messages only MESSAGE frames of its subscription: a broker's MESSAGE for another
// subscription, or a RECEIPT it never asked for, ends the connection (redialled), nothing delivered.
func TestSTOMPConsumerBelievesOnlyItsSubscription(t *testing.T) {
	addr := stompConsumeFake(t, func(conn int, sub string, _ net.Conn, w *frame.Writer) {
		forged := frame.New(frame.MESSAGE, frame.Subscription, sub+"7", frame.Destination, "/queue/t", frame.MessageId, "1")
		forged.Body = []byte("forged")
		switch conn {
		case 0:
			_ = w.Write(forged)
		case 1:
			_ = w.Write(frame.New(frame.RECEIPT, frame.ReceiptId, "bye"))
			_ = w.Write(realMessage(sub)) // after the stray receipt: not to be taken
		default:
			_ = w.Write(realMessage(sub))
		}
	})
	if got := consumeUntilReal(t, addr); len(got) != 1 || got[0] != "real" {
		t.Errorf("delivered %q, want only the third connection's real message", got)
	}
}

// A broker announcing a body larger than any message (go-stomp's reader allocated the 4 GB it claimed
// and waited for them) or sending a header line without end gets its connection closed, not memory.
func TestSTOMPConsumerBoundsFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  string
	}{
		{"content-length 4 GB", "MESSAGE\nsubscription:%s\ndestination:/queue/t\nmessage-id:1\ncontent-length:4000000000\n\n"},
		{"content-length past the largest message", "MESSAGE\nsubscription:%s\ndestination:/queue/t\nmessage-id:1\ncontent-length:67108865\n\n"},
		{"endless header line", "MESSAGE\nsubscription:%s\nx:" + strings.Repeat("y", 1<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := stompConsumeFake(t, func(conn int, sub string, c net.Conn, w *frame.Writer) {
				if conn == 0 {
					_, _ = fmt.Fprintf(c, tc.bad, sub)
					return
				}
				_ = w.Write(realMessage(sub))
			})
			if got := consumeUntilReal(t, addr); len(got) != 1 || got[0] != "real" {
				t.Errorf("delivered %q, want only the second connection's real message", got)
			}
		})
	}
}
