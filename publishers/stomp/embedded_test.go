package stomp

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"
)

func TestBoundedQueues(t *testing.T) {
	msg := func(body string) *frame.Frame {
		f := frame.New(frame.MESSAGE, frame.Destination, "/queue/q")
		f.Body = []byte(body)
		return f
	}
	size := frameSize(msg(strings.Repeat("x", 10)))
	cases := []struct {
		name   string
		max    int64
		bodies []string
		want   []string // bodies dequeued from /queue/a, in order
	}{
		{"under budget keeps all, FIFO", 10 * size, []string{"0000000001", "0000000002", "0000000003"}, []string{"0000000001", "0000000002", "0000000003"}},
		{"over budget drops the oldest", 2 * size, []string{"0000000001", "0000000002", "0000000003"}, []string{"0000000002", "0000000003"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := newBoundedQueues(c.max, slog.New(slog.NewTextHandler(io.Discard, nil)))
			for _, b := range c.bodies {
				if err := q.Enqueue("/queue/a", msg(b)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for {
				f, err := q.Dequeue("/queue/a")
				if err != nil {
					t.Fatal(err)
				}
				if f == nil {
					break
				}
				got = append(got, string(f.Body))
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("got %v, want %v", got, c.want)
			}
			if q.bytes != 0 {
				t.Errorf("%d bytes accounted after draining", q.bytes)
			}
		})
	}
}

// TestBoundedQueuesCountTheirMemory: the budget bounds the memory the queued frames take, small frames'
// bookkeeping (frame, header slice, list element) included, not only their bytes on the wire.
func TestBoundedQueuesCountTheirMemory(t *testing.T) {
	const max = 4 << 20
	for _, tc := range []struct {
		name string
		body int
	}{
		{"empty bodies", 0},
		{"10-byte bodies", 10},
		{"1 KiB bodies", 1 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			q := newBoundedQueues(max, slog.New(slog.DiscardHandler))
			for i := range 200000 {
				// Allocated strings, as go-stomp's frame reader makes them.
				f := frame.New(frame.MESSAGE, frame.Destination, fmt.Sprint("/queue/", i%3), frame.MessageId, fmt.Sprint(i),
					frame.ContentType, strings.Clone("text/plain"), frame.ContentLength, fmt.Sprint(tc.body))
				f.Body = make([]byte, tc.body)
				if err := q.Enqueue(fmt.Sprint("/queue/", i%3), f); err != nil {
					t.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > 2*max {
				t.Errorf("the queues hold %d bytes of heap, over twice their budget of %d", held, max)
			}
			runtime.KeepAlive(q)
		})
	}
}
