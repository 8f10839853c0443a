package load

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The open model: request k is due at start + k/rate. The pacer, on a thread of its own (pacer.go),
// writes each request itself when it is due, on an idle connection; every connection has a worker
// goroutine that reads its answers (and, while the connection is idle, notices the target closing it
// or sending what nobody asked for, as net/http's background read does). So between the due time
// and the write there is only the pacer's own wake-up: no goroutine to wake, no lock, no allocation.
// When no connection is idle a new worker is started, up to the run's workers: on Linux, for plain
// HTTP to an IP address, the pacer itself connects (without waiting for the handshake) and writes the
// request, and the worker reads the answer (open_linux.go); otherwise the worker connects and sends
// that one request itself (its start then counts as lag, the dial as service). A request that waits
// for a worker is late, and its latency counts from when it was due.

// Worker states. The pacer claims an idle worker (idle → busy) before writing on its connection; the
// worker's read, which began while the connection was idle, then takes the answer (busy → reading).
// A read that ends while the worker is still idle ended the connection (idle → dead); a write that
// failed is counted by the pacer (busy → failed), and the worker's read then only ends it.
const (
	workerIdle int32 = iota
	workerBusy
	workerReading
	workerFailed
	workerDead
)

type openWorker struct {
	c         conn
	state     atomic.Int32
	due, sent time.Time              // of the request in flight; set by the pacer before it claims
	rec       *recorder              // where the request in flight is counted (the warm-up's or not)
	cur       atomic.Pointer[netBox] // the connection, for the end of the run to stop the idle read
	// writing: a large request's write still running on its own goroutine; the worker waits for it
	// before it is idle again, so a late write failure can only meet this request's states.
	writing sync.WaitGroup
}

type netBox struct{ nc net.Conn }

type openRun struct {
	s        *sender
	idle     chan *openWorker
	live     atomic.Int64 // workers running
	inflight sync.WaitGroup
	wg       sync.WaitGroup
	closing  atomic.Bool
	mu       sync.Mutex
	all      []*openWorker
}

// open runs the open model from start: the requests k of sc with k mod shards = shard. It returns the
// measured part's requests that were due and never sent: lateGrace after the end the workers were still
// all busy, or the pacer still behind (or ctx ended).
func (s *sender) open(ctx context.Context, start time.Time, sc schedule, shard, shards int64, workers int) (notSent int64) {
	// The pacer's thread sleeps in nanosleep holding its P (the runtime's processor) for long stretches;
	// one P more keeps the workers' share of the cores what GOMAXPROCS gave them.
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + 1)
	defer runtime.GOMAXPROCS(procs)

	o := &openRun{s: s, idle: make(chan *openWorker, workers)}
	stop := time.NewTimer(time.Until(start.Add(sc.warmup + sc.duration + lateGrace)))
	defer stop.Stop()
	paced := make(chan int64)
	go func() { // the pacer: locked to its thread, which ends with it (see newPacer)
		p := newPacer()
		sent := int64(0) // of the measured part
		defer func() { paced <- sent }()
		for k := shard; k < sc.n; k += shards {
			due := start.Add(sc.offset(k))
			if !p.wait(ctx, due) {
				return
			}
			select {
			case <-stop.C: // a generator without the CPU to catch up: what is left is not sent
				return
			default:
			}
			rec := s.rec
			if k < sc.warm {
				rec = s.warm
			}
			if !o.dispatch(ctx, stop.C, due, rec, workers) {
				return
			}
			if k >= sc.warm {
				sent++
			}
		}
	}()
	sent := <-paced
	o.inflight.Wait()
	o.end()
	o.wg.Wait()
	return shardCount(sc.n, shard, shards) - shardCount(sc.warm, shard, shards) - sent
}

// shardCount is how many k in [0, x) have k mod shards = shard.
func shardCount(x, shard, shards int64) int64 {
	if x <= shard {
		return 0
	}
	return (x - shard + shards - 1) / shards
}

// dispatch sends the request due at due: written on an idle connection, or by a new worker. It
// returns false when ctx or the run's end came while every worker was busy.
func (o *openRun) dispatch(ctx context.Context, stop <-chan time.Time, due time.Time, rec *recorder, workers int) bool {
	for {
		var w *openWorker
		select {
		case w = <-o.idle:
		default:
			if o.live.Load() < int64(workers) {
				sent := time.Now()
				if s := o.s.wire.startWritten(); s != nil {
					o.resume(s, due, sent, rec)
				} else {
					o.start(due, rec)
				}
				return true
			}
			select { // every worker busy: wait for one, but not past the end
			case w = <-o.idle:
			case <-ctx.Done():
				return false
			case <-stop:
				return false
			}
		}
		// The worker put itself here after storing its connection in cur, and reads nothing of due and
		// sent until it sees the claim; a dead worker may be closing its conn, so only cur is read.
		nc := w.cur.Load().nc
		w.due, w.rec, w.sent = due, rec, time.Now()
		if !w.state.CompareAndSwap(workerIdle, workerBusy) {
			continue // its connection ended while idle: the next one
		}
		o.inflight.Add(1)
		if len(o.s.wire.request) <= inlineWriteMax {
			o.write(w, nc)
		} else {
			w.writing.Add(1)
			o.wg.Go(func() { defer w.writing.Done(); o.write(w, nc) })
		}
		return true
	}
}

// inlineWriteMax: a request up to this size fits any socket's send buffer, so the pacer's write never
// waits; a larger one (a big -body) is written by a goroutine of its own, so the pacer stays on time.
const inlineWriteMax = 16 << 10

// write writes the request on w's connection nc; a failed write is counted here.
func (o *openRun) write(w *openWorker, nc net.Conn) {
	_ = nc.SetDeadline(w.sent.Add(o.s.wire.timeout))
	if _, err := nc.Write(o.s.wire.request); err != nil && w.state.CompareAndSwap(workerBusy, workerFailed) {
		_ = nc.Close()
		w.rec.add(0, "writing the request: "+errorKind(err), "", w.due, w.sent, time.Now())
		o.inflight.Done()
	}
}

// start runs a new worker, which connects and sends the request due at due itself.
func (o *openRun) start(due time.Time, rec *recorder) {
	o.worker(func(c *conn) {
		o.s.send(c, rec, due, time.Now())
	})
}

// resume runs a new worker on the connection the pacer opened at sent and began the request due at
// due on: the worker reads the answer. The pacer's connect and write take microseconds on its own
// thread, where starting a goroutine to do them is late by as long as the scheduler makes it wait
// (every connection busy is when the target stalls, when the cores are busiest).
func (o *openRun) resume(s *socket, due, sent time.Time, rec *recorder) {
	o.worker(func(c *conn) {
		a := o.s.wire.resume(c, s, sent, rec.wantSample)
		rec.add(a.code, a.err, a.sample, due, sent, time.Now())
	})
}

// worker runs a new worker whose first request first sends and counts.
func (o *openRun) worker(first func(c *conn)) {
	w := &openWorker{}
	o.mu.Lock()
	o.all = append(o.all, w)
	o.mu.Unlock()
	o.live.Add(1)
	o.inflight.Add(1)
	o.wg.Go(func() {
		defer o.live.Add(-1)
		defer w.c.close()
		first(&w.c)
		o.inflight.Done()
		for o.serve(w) {
		}
	})
}

// serve makes w idle and reads the next answer on its connection (reconnecting first when the last
// answer closed it); false when the worker ends.
func (o *openRun) serve(w *openWorker) bool {
	c, wire := &w.c, o.s.wire
	if c.nc != nil && c.br.Buffered() > 0 {
		c.close() // the target sent more than the last answer: bytes ahead answer nothing of ours
	}
	if c.nc == nil {
		if o.closing.Load() || wire.connect(c, time.Now().Add(wire.timeout)) != nil {
			return false // a request of its own will find out why, on a new worker
		}
	}
	w.cur.Store(&netBox{c.nc})
	if o.closing.Load() {
		return false
	}
	w.writing.Wait()
	c.r.n, c.r.limit = 0, maxHeadBytes
	w.state.Store(workerIdle)
	o.idle <- w // never blocks: it holds at most one entry per worker
	resp, err := wire.read(c)
	if w.state.CompareAndSwap(workerIdle, workerDead) {
		return false // closed by the target, or bytes nobody asked for, or the run's end
	}
	if !w.state.CompareAndSwap(workerBusy, workerReading) {
		return false // the write failed, and the pacer counted it
	}
	a := wire.finish(c, resp, err, w.rec.wantSample)
	w.rec.add(a.code, a.err, a.sample, w.due, w.sent, time.Now())
	o.inflight.Done()
	return true
}

// end stops every idle worker's read; every request in flight has been answered (or timed out).
func (o *openRun) end() {
	o.closing.Store(true)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range o.all {
		if b := w.cur.Load(); b != nil {
			_ = b.nc.SetReadDeadline(time.Now())
		}
	}
}
