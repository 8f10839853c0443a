package consume

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/nsq"
)

// body builds the payload of sequence number seq in run, sent at sent.
func body(run uint32, seq uint64, sent time.Time) []byte {
	return fmt.Appendf(nil, "%s %019d xxxx", message.FormatID(uint64(run)<<40|seq), sent.UnixNano())
}

// wideBody is a payload of today's format, with the 64-bit run; its ids carry the run's top 24 bits.
func wideBody(run, seq uint64, sent time.Time) []byte {
	return fmt.Appendf(nil, "%s %019d %016x xxxx", message.FormatID(run>>40<<40|seq), sent.UnixNano(), run)
}

func TestTally(t *testing.T) {
	t0 := time.Unix(1796083200, 0)
	type msg struct {
		run  uint32
		seq  uint64
		wide uint64 // the payload's 64-bit run (0: a payload without one; run is its prefix)
	}
	cases := []struct {
		name     string
		msgs     []msg
		garbage  int
		lost     int
		dups     int
		runs     int
		gaps     []Gap // of the first run
		received int   // distinct ids of the first run
	}{
		{name: "exact", msgs: []msg{{1, 1, 0}, {1, 2, 0}, {1, 3, 0}}, runs: 1, received: 3},
		{name: "out of order is not loss", msgs: []msg{{1, 3, 0}, {1, 1, 0}, {1, 2, 0}}, runs: 1, received: 3},
		{name: "one lost", msgs: []msg{{1, 1, 0}, {1, 3, 0}}, lost: 1, runs: 1, gaps: []Gap{{2, 2}}, received: 2},
		{name: "a range lost", msgs: []msg{{1, 5, 0}, {1, 9, 0}, {1, 10, 0}}, lost: 3, runs: 1, gaps: []Gap{{6, 8}}, received: 3},
		{name: "duplicate", msgs: []msg{{1, 1, 0}, {1, 2, 0}, {1, 2, 0}}, dups: 1, runs: 1, received: 2},
		{name: "runs apart", msgs: []msg{{1, 1, 0}, {1, 2, 0}, {2, 7, 0}, {2, 9, 0}}, lost: 1, runs: 2, received: 2},
		{name: "unparsable", msgs: []msg{{1, 1, 0}}, garbage: 2, runs: 1, received: 1},
		{name: "two runs sharing the id prefix", msgs: []msg{{0, 1, 0xc0ffee0000000001}, {0, 2, 0xc0ffee0000000001}, {0, 1, 0xc0ffee0000000002},
			{0, 2, 0xc0ffee0000000002}}, runs: 2, received: 2},
		{name: "one wide run, one lost", msgs: []msg{{0, 1, 0xc0ffee0000000001}, {0, 3, 0xc0ffee0000000001}}, lost: 1, runs: 1, gaps: []Gap{{2, 2}}, received: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tally := NewTally()
			for i, m := range c.msgs {
				b := body(m.run, m.seq, t0)
				if m.wide != 0 {
					b = wideBody(m.wide, m.seq, t0)
				}
				tally.Add(publishers.Delivery{Body: b, Received: t0.Add(time.Duration(i+1) * time.Millisecond)})
			}
			for range c.garbage {
				tally.Add(publishers.Delivery{Body: []byte("not ours"), Received: t0})
			}
			r := tally.Report(time.Second)
			if r.Count != len(c.msgs)+c.garbage || r.Lost != c.lost || r.Duplicates != c.dups || r.Unparsable != c.garbage || len(r.Runs) != c.runs {
				t.Fatalf("count %d lost %d duplicates %d unparsable %d runs %d; want %d %d %d %d %d",
					r.Count, r.Lost, r.Duplicates, r.Unparsable, len(r.Runs), len(c.msgs)+c.garbage, c.lost, c.dups, c.garbage, c.runs)
			}
			if got := r.Runs[0]; got.Received != c.received || fmt.Sprint(got.Gaps) != fmt.Sprint(c.gaps) {
				t.Errorf("first run: received %d gaps %v, want %d %v", got.Received, got.Gaps, c.received, c.gaps)
			}
			if r.OK() != (c.lost == 0 && c.dups == 0) {
				t.Errorf("OK() = %v with %d lost and %d duplicates", r.OK(), c.lost, c.dups)
			}
		})
	}
}

func TestTallyLatency(t *testing.T) {
	t0 := time.Unix(1796083200, 0)
	tally := NewTally()
	for i := 1; i <= 100; i++ { // message i took i ms
		tally.Add(publishers.Delivery{Body: body(1, uint64(i), t0), Received: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	r := tally.Report(time.Second)
	want := Latency{Min: 1, P50: 50, P90: 90, P99: 99, Max: 100}
	if r.Latency != want {
		t.Errorf("latency %+v, want %+v", r.Latency, want)
	}
	if r.Rate < 999 || r.Rate > 1001 { // 99 intervals in 99 ms
		t.Errorf("rate %v msg/s, want 1000", r.Rate)
	}
}

// fakeConsumer delivers its bodies, then waits for the end of ctx, like a broker with nothing more.
type fakeConsumer struct {
	bodies [][]byte
	err    error
}

func (f *fakeConsumer) Consume(ctx context.Context, topic string, handle func(publishers.Delivery)) error {
	if f.err != nil {
		return f.err
	}
	for _, b := range f.bodies {
		if ctx.Err() != nil {
			return nil
		}
		handle(publishers.Delivery{Topic: topic, Body: b, Received: time.Now()})
	}
	<-ctx.Done()
	return nil
}
func (f *fakeConsumer) Hosts() []string { return []string{"fake"} }
func (f *fakeConsumer) Close() error    { return nil }

func TestRunStops(t *testing.T) {
	now := time.Now()
	five := &fakeConsumer{}
	for i := 1; i <= 5; i++ {
		five.bodies = append(five.bodies, body(1, uint64(i), now))
	}
	cases := []struct {
		name  string
		o     Options
		count int
		ok    bool
	}{
		{name: "count reached", o: Options{Count: 3}, count: 3, ok: true},
		{name: "duration ends a shortfall", o: Options{Count: 10, Duration: 50 * time.Millisecond}, count: 5, ok: false},
		{name: "duration alone", o: Options{Duration: 50 * time.Millisecond}, count: 5, ok: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.o.Topic = "t"
			r, err := Run(ctx, five, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("Run did not stop by itself")
			}
			if r.Count != c.count || r.OK() != c.ok {
				t.Errorf("count %d ok %v, want %d %v", r.Count, r.OK(), c.count, c.ok)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		c    publishers.Consumer
		o    Options
		want string
	}{
		{name: "negative count", c: &fakeConsumer{}, o: Options{Count: -1}, want: "count"},
		{name: "negative duration", c: &fakeConsumer{}, o: Options{Duration: -time.Second}, want: "duration"},
		{name: "consumer fails", c: &fakeConsumer{err: boom}, o: Options{Count: 1}, want: "boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Run(t.Context(), c.c, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one naming %q", err, c.want)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	r := Report{Broker: "nsq", Topic: "t", Count: 3, Lost: 1, Runs: []RunStats{{Run: "00c0ff", FirstSeq: 1, LastSeq: 4, Received: 3, Lost: 1, Gaps: []Gap{{3, 3}}}}}
	var table bytes.Buffer
	if err := r.Write(&table, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "run 00c0ff: seq 1..4, 3 received, 1 lost: 3") {
		t.Errorf("table lacks the run's gap:\n%s", table.String())
	}
	var js bytes.Buffer
	if err := r.Write(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Lost != 1 || back.Runs[0].Gaps[0].From != 3 {
		t.Errorf("json %s: %v, %+v", js.String(), err, back)
	}
	if err := r.Write(&js, "csv"); err == nil || !strings.HasPrefix(err.Error(), "o:") {
		t.Errorf("unknown format: %v, want an error naming -o", err)
	}
}

// TestRunNSQ publishes to an in-process nsqd with the NSQ publisher and reads it back with Run.
func TestRunNSQ(t *testing.T) {
	cfg, pub := itest.EmbeddedNSQ(t, 1)
	log := slog.New(slog.DiscardHandler)
	cons, err := nsq.NewConsumer(cfg, publishers.ConsumerOptions{}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := message.NewSource()
	published := time.Now()
	const n = 300
	for i := range n {
		if i == 100 {
			src.NextID() // an id taken and never published: one lost
		}
		if err := pub.Publish(ctx, 0, "runnsq", src.Build(src.NextID(), 64)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Run(ctx, cons, Options{Broker: "nsq", Topic: "runnsq", Count: n})
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != n || r.Lost != 1 || r.Duplicates != 0 || len(r.Runs) != 1 || r.Runs[0].Gaps[0] != (Gap{101, 101}) {
		t.Fatalf("report %+v, want %d messages, the one gap at 101", r, n)
	}
	if r.Latency.Min <= 0 || r.Latency.Max > ms(time.Since(published)) {
		t.Errorf("latency %+v ms: want positive and at most the %v since the first publish", r.Latency, time.Since(published))
	}
}
