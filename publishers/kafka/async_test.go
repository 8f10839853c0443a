package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/kafka"
	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// handOver bounds PublishAsync's return: a hand-over, never a wait for the network (/sendAsync answers
// at once).
const handOver = 100 * time.Millisecond

// asyncOutcomes are the dones of async publishes: how often each ran, and each outcome as it came.
type asyncOutcomes struct {
	calls []atomic.Int32
	errs  chan indexed
}

type indexed struct {
	i   int
	err error
}

// publishAsync makes n async publishes of prefix0, prefix1, ... to topic, each of which must be taken
// within within.
func publishAsync(t *testing.T, p *kafka.Publisher, topic, prefix string, n int, within time.Duration) *asyncOutcomes {
	t.Helper()
	o := &asyncOutcomes{calls: make([]atomic.Int32, n), errs: make(chan indexed, 2*n)}
	for i := range n {
		start := time.Now()
		err := p.PublishAsync(0, topic, fmt.Appendf(nil, "%s%d", prefix, i), func(err error) {
			o.calls[i].Add(1)
			o.errs <- indexed{i, err}
		})
		if took := time.Since(start); took > within {
			t.Fatalf("async publish %d returned after %v: it waited for the topic lookup on its caller's goroutine", i, took)
		}
		if err != nil {
			t.Fatalf("async publish %d: %v, want it taken while its topic is looked up", i, err)
		}
	}
	return o
}

// wait returns the n outcomes, in the order they came, failing the test when they take longer than d.
func (o *asyncOutcomes) wait(t *testing.T, d time.Duration) []indexed {
	t.Helper()
	var out []indexed
	end := time.After(d)
	for range o.calls {
		select {
		case r := <-o.errs:
			out = append(out, r)
		case <-end:
			t.Fatalf("%d of %d dones ran within %v", len(out), len(o.calls), d)
		}
	}
	return out
}

// once checks that every done ran exactly once.
func (o *asyncOutcomes) once(t *testing.T) {
	t.Helper()
	for i := range o.calls {
		if n := o.calls[i].Load(); n != 1 {
			t.Errorf("done of async publish %d ran %d times, want once", i, n)
		}
	}
}

// TestAsyncSlowLookup: with the connection up and a topic's lookup slow (the broker holds its metadata
// answers), PublishAsync returns at once and done gets the outcome: the acknowledgement once the lookup
// ends in time; ErrTimeout at publish_timeout when it does not, and then the message is not sent when
// the lookup ends after all (the broker holds what was acknowledged, no more).
func TestAsyncSlowLookup(t *testing.T) {
	const timeout = time.Second
	f, p := fakePublisher(t, pt.Honest, timeout)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, 0, "warm", []byte("warm")); err != nil { // the connections are up
		t.Fatal(err)
	}
	const n = 5

	t.Run("it ends in time", func(t *testing.T) {
		release := f.hold(t)
		o := publishAsync(t, p, "slow-lookup", "in-time-", n, handOver)
		select {
		case r := <-o.errs:
			t.Fatalf("done of async publish %d ran while its topic's lookup was held: %v", r.i, r.err)
		case <-time.After(300 * time.Millisecond):
		}
		release()
		for _, r := range o.wait(t, 5*time.Second) {
			if r.err != nil {
				t.Errorf("async publish %d: %v, want it acknowledged once its topic is known", r.i, r.err)
			}
		}
		o.once(t)
		stored := f.Stored()
		for i := range n {
			if got := stored[fmt.Sprint("in-time-", i)]; got != 1 {
				t.Errorf("in-time-%d stored %d times, want once", i, got)
			}
		}
	})

	t.Run("it ends past publish_timeout", func(t *testing.T) {
		release := f.hold(t)
		start := time.Now()
		o := publishAsync(t, p, "late-lookup", "late-", n, handOver)
		for _, r := range o.wait(t, timeout+2*time.Second) {
			if !errors.Is(r.err, publishers.ErrTimeout) {
				t.Errorf("async publish %d: %v, want ErrTimeout at publish_timeout", r.i, r.err)
			}
		}
		if took := time.Since(start); took > timeout+500*time.Millisecond {
			t.Errorf("the dones ran %v after the calls, publish_timeout %v", took, timeout)
		}
		release()
		// The lookup goes on and ends now: a publish that joins it finds the topic, and the timed-out
		// ones stay unsent.
		if err := p.Publish(ctx, 0, "late-lookup", []byte("after")); err != nil {
			t.Fatalf("Publish after the lookup was released: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // a timed-out publish sent by mistake would be stored by now
		o.once(t)
		stored := f.Stored()
		for i := range n {
			if got := stored[fmt.Sprint("late-", i)]; got != 0 {
				t.Errorf("late-%d, answered ErrTimeout, stored %d times", i, got)
			}
		}
		if got := stored["after"]; got != 1 {
			t.Errorf("after stored %d times, want once", got)
		}
	})
}

// TestCloseWhileAsyncWaits: publishers.MaxAsyncWaiting async publishes queued on a topic lookup that
// does not end (the broker holds its metadata answer) are taken at once, one more is refused as
// unavailable at once; Close returns promptly, every done got ErrClosed exactly once, nothing was
// sent, and no goroutine is left.
func TestCloseWhileAsyncWaits(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	f, p := fakePublisher(t, pt.Honest, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, 0, "warm", []byte("warm")); err != nil { // the connections are up
		t.Fatal(err)
	}
	f.hold(t)
	// Each within a second: a publish that waited for the lookup would wait its minute.
	o := publishAsync(t, p, "held", "held-", publishers.MaxAsyncWaiting, time.Second)
	start := time.Now()
	err := p.PublishAsync(0, "held", []byte("one too many"), func(err error) { t.Errorf("done of a refused publish ran: %v", err) })
	if !errors.Is(err, publishers.ErrUnavailable) || time.Since(start) > handOver {
		t.Errorf("async publish past publishers.MaxAsyncWaiting: %v after %v, want ErrUnavailable at once", err, time.Since(start))
	}
	start = time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v", took)
	}
	// Close waits for every done: they have all run.
	if got := len(o.errs); got != publishers.MaxAsyncWaiting {
		t.Fatalf("%d dones ran by the time Close returned, want %d", got, publishers.MaxAsyncWaiting)
	}
	for _, r := range o.wait(t, time.Second) {
		if !errors.Is(r.err, publishers.ErrClosed) {
			t.Fatalf("async publish %d: %v, want ErrClosed", r.i, r.err)
		}
	}
	o.once(t)
	if got := f.Stored(); len(got) != 1 {
		t.Errorf("the broker stored %v, want warm only", got)
	}
	f.Close()
	goleak.VerifyNone(t, ignore)
}
