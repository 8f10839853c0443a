package roundtrip

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
)

// BatchOptions configure one batch experiment: Count messages of Size bytes published by Producers,
// returned by an echo, their acks correlated.
type BatchOptions struct {
	Broker    string
	Publisher publishers.Publisher
	Acks      publishers.Consumer // reads Topic+AckSuffix
	// Echo, when set, runs an echo in this process (Topics, AckSuffix, Publisher and Broker are set by
	// Batch); nil: a remote echo answers.
	Echo      *EchoOptions
	Topic     string
	AckSuffix string // default DefaultAckSuffix
	Count     int
	Size      int
	Producers int
	// Wait bounds the wait for acks after the last publish; an ack not back by then is lost.
	Wait time.Duration
	// Grace is how long to keep listening after the last ack, for duplicates that trail it.
	Grace time.Duration
	// ProbeWait bounds the wait, before the first measured publish, for a probe back from every host
	// (Client.Probe); 0: DefaultProbeWait.
	ProbeWait time.Duration
	// Progress, when set, is called every progressEvery while the batch runs, from one goroutine Batch
	// owns and waits for, and once more at the end.
	Progress func(Progress)
}

// Progress is how far a running batch got.
type Progress struct {
	Count, Sent, Acked int
	Elapsed            time.Duration
}

// progressEvery is how often Batch reports Progress; the receiver throttles further as it likes.
const progressEvery = 100 * time.Millisecond

// Result is one batch's row; times in milliseconds.
type Result struct {
	Broker        string  `json:"broker"`
	Count         int     `json:"count"`
	Size          int     `json:"size"`
	SendMs        float64 `json:"send_ms"`
	EchoReceiveMs float64 `json:"echo_receive_ms"` // first to last message at the echo (in-process echo only)
	// EchoLastLatencyMs is the send → echo latency of the last message to reach the echo (the seeds'
	// "最后单条消息消耗"), EchoMaxLatencyMs the longest one.
	EchoLastLatencyMs float64 `json:"echo_last_latency_ms"`
	EchoMaxLatencyMs  float64 `json:"echo_max_latency_ms"`
	ReturnReceiveMs   float64 `json:"return_receive_ms"` // first to last ack
	// ReturnLastLatencyMs is the round trip of the last ack to come back; the longest is RTTMaxMs.
	ReturnLastLatencyMs float64 `json:"return_last_latency_ms"`
	RTTP50Ms            float64 `json:"rtt_p50_ms"`
	RTTP99Ms            float64 `json:"rtt_p99_ms"`
	RTTMaxMs            float64 `json:"rtt_max_ms"`
	Lost                int     `json:"lost"`
	Duplicates          int     `json:"duplicates"`
}

// OK reports a batch that came back exactly once.
func (r Result) OK() bool { return r.Lost == 0 && r.Duplicates == 0 }

// span tracks the first and last arrival of a stream of messages, the latency of the last to arrive
// and the longest.
type span struct {
	mu                      sync.Mutex
	first, last             time.Time
	lastLatency, maxLatency time.Duration
}

// add records one arrival; they may be added in any order (the acks are read in send order).
func (s *span) add(received, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first.IsZero() || received.Before(s.first) {
		s.first = received
	}
	if received.After(s.last) {
		s.last, s.lastLatency = received, received.Sub(sent)
	}
	s.maxLatency = max(s.maxLatency, received.Sub(sent))
}

// spanTimes is what a span recorded, read at one instant.
type spanTimes struct {
	first, last             time.Time
	lastLatency, maxLatency time.Duration
}

// times reads the span under its lock: the echo may still add to it (a late redelivery).
func (s *span) times() spanTimes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return spanTimes{first: s.first, last: s.last, lastLatency: s.lastLatency, maxLatency: s.maxLatency}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Batch runs one batch. It returns an error only when the experiment could not run (the echo did not
// start, a probe did not come back from a host within o.ProbeWait: ErrNotLive, a publish failed, ctx
// ended: its error); lost and duplicated acks are in the Result, which never counts a probe.
func Batch(ctx context.Context, o BatchOptions) (Result, error) {
	if o.Count < 1 || o.Size < message.HeaderLen || o.Producers < 1 {
		return Result{}, fmt.Errorf("batch: count %d, size %d (at least %d), producers %d", o.Count, o.Size, message.HeaderLen, o.Producers)
	}
	if o.AckSuffix == "" {
		o.AckSuffix = DefaultAckSuffix
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	corr := NewCorrelator(o.Broker, time.Hour, nil)
	corr.maxFinished = max(corr.maxFinished, o.Count) // a duplicate of any of the batch is one
	var atEcho span
	if o.Echo != nil {
		eo := *o.Echo
		eo.Broker, eo.Publisher, eo.Topics, eo.AckSuffix = o.Broker, o.Publisher, []string{o.Topic}, o.AckSuffix
		eo.observe = func(d publishers.Delivery) {
			if id, sent, err := message.Parse(d.Body); err == nil && !corr.IsProbe(id) {
				atEcho.add(d.Received, sent)
			}
		}
		echo, err := StartEcho(eo)
		if err != nil {
			return Result{}, err
		}
		defer echo.Close()
	}
	client := NewClient(o.Publisher, o.Acks, []string{o.Topic}, o.AckSuffix, corr, nil)
	defer client.Close()

	src := message.NewSource()
	// The consumers subscribe in the background: on a broker that keeps nothing for a topic without a
	// subscriber (topics with no retention) what is published before then reaches nobody and would
	// count as lost. The batch starts once a probe came back from every host (probe.go says why a probe).
	if err := client.Probe(ctx, o.Topic, src, o.ProbeWait); err != nil {
		return Result{}, fmt.Errorf("batch: %w", err)
	}
	pending := make([]*Pending, o.Count)
	hosts := len(o.Publisher.Hosts())
	var next, sent atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, o.Producers)
	start := time.Now()
	if o.Progress != nil {
		stopProgress := reportProgress(o, start, &sent, corr)
		defer stopProgress()
	}
	for p := range o.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= o.Count || ctx.Err() != nil {
					return
				}
				id := src.NextID()
				pending[i] = corr.Expect(message.FormatID(id))
				if err := o.Publisher.Publish(ctx, i%hosts, o.Topic, src.Build(id, o.Size)); err != nil {
					pending[i].Cancel()
					errs[p] = fmt.Errorf("publishing message %d: %w", i+1, err)
					cancel()
					return
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	sendTime := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	// ctx ended (a failed publish, which also cancels it, is in errs): a producer may have claimed an
	// index and left without its Pending, and a batch cut short measures nothing.
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}

	r := Result{Broker: o.Broker, Count: o.Count, Size: o.Size, SendMs: ms(sendTime)}
	wait, cancelWait := context.WithTimeout(ctx, o.Wait)
	defer cancelWait()
	var back span
	rtts := make([]time.Duration, 0, o.Count)
	for _, p := range pending {
		a, err := p.Wait(wait)
		if err != nil {
			continue // counted lost by the correlator
		}
		back.add(a.Received, a.Sent)
		rtts = append(rtts, a.RTT)
	}
	if o.Grace > 0 && ctx.Err() == nil {
		t := time.NewTimer(o.Grace) // a measurement window for trailing duplicates, not synchronisation
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err := ctx.Err(); err != nil { // ended while waiting: what had not come back was not lost
		return Result{}, err
	}
	st := corr.Stats()
	r.Lost, r.Duplicates = int(st.Lost), int(st.Duplicates)
	if len(rtts) > 0 {
		slices.Sort(rtts)
		pct := func(q float64) float64 { return ms(rtts[int(q*float64(len(rtts)-1)+0.5)]) }
		r.RTTP50Ms, r.RTTP99Ms, r.RTTMaxMs = pct(0.5), pct(0.99), ms(rtts[len(rtts)-1])
		r.ReturnReceiveMs, r.ReturnLastLatencyMs = ms(back.last.Sub(back.first)), ms(back.lastLatency)
	}
	if e := atEcho.times(); !e.first.IsZero() {
		r.EchoReceiveMs, r.EchoLastLatencyMs, r.EchoMaxLatencyMs = ms(e.last.Sub(e.first)), ms(e.lastLatency), ms(e.maxLatency)
	}
	return r, nil
}

// reportProgress calls o.Progress every progressEvery until the returned stop is called, which waits
// for the goroutine and reports the final state once more.
func reportProgress(o BatchOptions, start time.Time, sent *atomic.Int64, corr *Correlator) (stop func()) {
	report := func(now time.Time) {
		o.Progress(Progress{Count: o.Count, Sent: int(sent.Load()), Acked: int(corr.Stats().Acked), Elapsed: now.Sub(start)})
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				report(now)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		report(time.Now())
	}
}
