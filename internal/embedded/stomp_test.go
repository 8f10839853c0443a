package embedded

import (
	"io"
	"log/slog"
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
