package itest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
	"github.com/mqtarget/mqtarget/message"
)

// FaultHarness is a Harness whose host can also be killed outright and read back completely.
type FaultHarness interface {
	Harness
	// KillHost sends SIGKILL to host's broker process and returns once it is gone; StartHost restarts it.
	KillHost(t testing.TB, host int)
	// ConsumeAll returns every message the broker holds on topic (at least atLeast are expected),
	// duplicates and strays included.
	ConsumeAll(t testing.TB, host int, topic string, atLeast int) [][]byte
}

// slacker is a FaultHarness whose broker client holds more goroutines at rest than goroutineSlack
// allows for connections opened under load after the baseline.
type slacker interface {
	GoroutineSlack() int
}

// launcher is a FaultHarness that can restart a host without waiting for its script's readiness probes:
// the load shows when the broker takes messages again.
type launcher interface {
	LaunchHost(t testing.TB, host int)
}

// Fault is a way to break a broker under load and mend it again.
type Fault struct {
	Name   string
	Inject func(t testing.TB, h FaultHarness)
	Mend   func(t testing.TB, h FaultHarness)
	// Hold is how long the fault stays after the first failed answer, so requests pile up against it
	// (a frozen broker answers nothing: the requests must run into publish_timeout).
	Hold time.Duration
	// Crash: the broker dies with what it holds in memory (see CrashLoser).
	Crash bool
}

// CrashLoser is a FaultHarness whose broker, killed, may lose messages it acknowledged just before:
// its acknowledgement waits neither for the message to be stored nor delivered (mosquitto's PUBACK;
// its persistence is a periodic save). CrashLoss is how long before the kill such an answer may have
// come; those messages may be missing, and are counted.
type CrashLoser interface{ CrashLoss() time.Duration }

// TopicLoser is a FaultHarness whose broker, killed, may lose a topic whole, its acknowledged messages
// with it (RabbitMQ 3.10 lost a durable queue made shortly before a kill -9: see its harness). For a crash
// TopicDurable must hold just before the kill; the load stops before the restart, and TopicDurable is
// asked again after it, before mqtarget publishes again (which would make the topic anew). A run in
// which the broker lost the topic says nothing about what mqtarget acknowledged: it is skipped once
// what the broker logged is printed.
type TopicLoser interface {
	TopicDurable(t testing.TB, host int, topic string) bool
}

// recoveryReporter is a FaultHarness whose broker logs what its recovery after a kill dropped: when
// acknowledged messages are missing, the test prints RecoveryReport, so a failure says whether the
// broker's own recovery lost them (a broker's fault) or they never reached it (ours).
type recoveryReporter interface{ RecoveryReport(t testing.TB) string }

// Faults are the two faults every broker goes through: kill -9 then restart through its script or
// process, and SIGSTOP then SIGCONT.
var Faults = []Fault{
	{Name: "kill -9",
		Inject: func(t testing.TB, h FaultHarness) { h.KillHost(t, 0) },
		Mend: func(t testing.TB, h FaultHarness) {
			if l, ok := h.(launcher); ok {
				l.LaunchHost(t, 0)
			} else {
				h.StartHost(t, 0)
			}
		},
		Hold: 500 * time.Millisecond, Crash: true},
	{Name: "freeze",
		Inject: func(t testing.TB, h FaultHarness) { h.FreezeHost(t, 0) },
		Mend:   func(t testing.TB, h FaultHarness) { h.ThawHost(t, 0) },
		Hold:   PublishTimeout + time.Second},
}

// loadEndpoint is one endpoint the fault load drives, with the messages one request publishes.
type loadEndpoint struct {
	path   string
	msgs   int
	ok     int           // the success status
	other  []int         // the failure statuses allowed besides 503 and 504
	hangUp time.Duration // the client gives up after this long (0: it waits for the answer)
	within time.Duration // the answer comes within this (0: answerBound)
}

// faultLoad is the mix of the load's requests: mostly /send1, as wrk runs it.
var faultLoad = []loadEndpoint{
	{"/send1", 1, http.StatusOK, nil, 0, 0},
	{"/send1", 1, http.StatusOK, nil, 0, 0},
	{"/send1", 1, http.StatusOK, nil, 0, 0},
	{"/send2", 2, http.StatusOK, nil, 0, 0},
	{"/send2?mode=sequential", 2, http.StatusOK, nil, 0, 0},
	{"/sendAsyncWait", 1, http.StatusOK, []int{http.StatusTooManyRequests}, 0, 0},
	// The async endpoints answer 429 once async.max_in_flight publishes await a broker that is gone;
	// sendAsync answers at once, whatever the broker does (a publish waiting for a redial or a topic
	// look-up waits on the publisher's goroutine).
	{"/sendAsync", 1, http.StatusAccepted, []int{http.StatusTooManyRequests}, 0, asyncBound},
	// A client that hangs up (wrk stopping, a client timeout): what mqtarget handed to the broker client
	// still finishes under publish_timeout and is never sent twice.
	{"/send1", 1, http.StatusOK, nil, 300 * time.Millisecond, 0},
}

// asyncBound is the latest /sendAsync may answer: at once, with a margin for a loaded machine.
const asyncBound = time.Second

// faultWorkers is the number of concurrent clients of the load.
const faultWorkers = 8

// answerBound is the latest any answer may come: publish_timeout and a margin for a loaded machine.
const answerBound = PublishTimeout + time.Second

// answer is one request of the load and what came back.
type answer struct {
	ep         loadEndpoint
	start, end time.Time
	status     int // 0: no HTTP answer (err, or the client hung up)
	hungUp     bool
	err        error
	ids        []string // ids of the messages in a 2xx reply
	published  int      // messages acknowledged by a failed request (a partial /send2)
}

// loadRun drives faultLoad against a target from faultWorkers goroutines until stop is called, and
// keeps every answer.
type loadRun struct {
	base, topic string
	client      *http.Client
	mu          sync.Mutex
	answers     []answer
	stopc       chan struct{}
	halted      sync.Once
	wg          sync.WaitGroup

	// The watchdog (see watch): requests in flight by sequence number, and what it saw.
	seq      int
	inFlight map[int]time.Time
	late     string        // the target's goroutines when a request first outlived answerBound
	maxGap   time.Duration // the longest the watchdog's 10 ms ticker took between ticks
}

func newLoadRun(base, topic string) *loadRun {
	// A client of its own with a timeout past the bound: a hung request shows up as an error, not a hung test.
	return &loadRun{base: base, topic: topic, stopc: make(chan struct{}), inFlight: map[int]time.Time{},
		client: &http.Client{Timeout: answerBound + 10*time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: faultWorkers}}}
}

// one sends a request to ep and records its answer.
func (l *loadRun) one(ep loadEndpoint) answer {
	sep := "?"
	if strings.Contains(ep.path, "?") {
		sep = "&"
	}
	a := answer{ep: ep, start: time.Now()}
	l.mu.Lock()
	l.seq++
	id := l.seq
	l.inFlight[id] = a.start
	l.mu.Unlock()
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if ep.hangUp > 0 {
		ctx, cancel = context.WithTimeout(ctx, ep.hangUp)
	}
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.base+ep.path+sep+"topic="+l.topic, nil)
	if err != nil {
		panic(err) // the URL is ours
	}
	resp, err := l.client.Do(req)
	if err == nil {
		var raw []byte
		raw, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		a.status = resp.StatusCode
		var r struct {
			Published int `json:"published"`
			Messages  []struct {
				ID string `json:"id"`
			} `json:"messages"`
		}
		if err == nil {
			if err = json.Unmarshal(raw, &r); err != nil {
				err = fmt.Errorf("reply %d is not JSON: %w: %q", a.status, err, raw)
			}
		}
		if a.status/100 == 2 {
			for _, m := range r.Messages {
				a.ids = append(a.ids, m.ID)
			}
			if len(a.ids) != ep.msgs && err == nil {
				err = fmt.Errorf("%d messages in a %d reply, want %d: %s", len(a.ids), a.status, ep.msgs, raw)
			}
		} else {
			a.published = r.Published
		}
	}
	a.end, a.err = time.Now(), err
	if ep.hangUp > 0 && ctx.Err() != nil {
		a.status, a.ids, a.err, a.hungUp = 0, nil, nil, true
	}
	l.mu.Lock()
	delete(l.inFlight, id)
	l.answers = append(l.answers, a)
	l.mu.Unlock()
	return a
}

// watch runs until stop: when a request first outlives answerBound it keeps the target's goroutines
// (goroutines: their stacks), so a late answer shows where the target held it; and it measures how
// late its own ticker ran, so a late answer also shows whether this process was running at all.
func (l *loadRun) watch(goroutines func() string) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-l.stopc:
			return
		case now := <-tick.C:
			l.mu.Lock()
			l.maxGap = max(l.maxGap, now.Sub(last))
			last = now
			overdue := l.late == "" && slices.ContainsFunc(slices.Collect(maps.Values(l.inFlight)), func(s time.Time) bool { return now.Sub(s) > answerBound })
			l.mu.Unlock()
			if overdue {
				g := goroutines()
				l.mu.Lock()
				l.late = fmt.Sprintf("at %s, a request in flight for over %v; the target's goroutines:\n%s", now.Format("15:04:05.000"), answerBound, g)
				l.mu.Unlock()
			}
		}
	}
}

// start runs the workers; worker w starts at endpoint w of the mix and goes round it.
func (l *loadRun) start() {
	for w := range faultWorkers {
		l.wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-l.stopc:
					return
				default:
				}
				if a := l.one(faultLoad[i%len(faultLoad)]); a.err != nil || a.status/100 != 2 {
					// A client backs off a little after a failure: a broker that refuses connections answers
					// 503 at once, and spinning on it would only take the CPU its restart needs.
					select {
					case <-l.stopc:
					case <-time.After(failurePause):
					}
				}
			}
		})
	}
}

// failurePause is how long a load client waits after a failed request.
const failurePause = 20 * time.Millisecond

// halt tells the workers to stop after their current request; stop also waits for them.
func (l *loadRun) halt() { l.halted.Do(func() { close(l.stopc) }) }

func (l *loadRun) stop() {
	l.halt()
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

// recovered reports whether every endpoint of the mix answered 200 to a request sent at or after since;
// /sendAsync's 202 does not count (it is only "accepted", also from a broker that is down).
func (l *loadRun) recovered(since time.Time) bool {
	for _, ep := range faultLoad {
		if ep.ok != http.StatusOK || ep.hangUp > 0 {
			continue
		}
		if _, ok := l.find(since, func(a answer) bool { return a.ep.equal(ep) && a.err == nil && a.status == ep.ok }); !ok {
			return false
		}
	}
	return true
}

// find returns the first answer (in completion order) that matches, started at or after since.
func (l *loadRun) find(since time.Time, match func(answer) bool) (answer, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.answers {
		if !a.start.Before(since) && match(a) {
			return a, true
		}
	}
	return answer{}, false
}

func (l *loadRun) snapshot() []answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.answers)
}

func failed(a answer) bool { return a.err == nil && !a.hungUp && a.status/100 != 2 }

// FaultTimes is what one fault run measured.
type FaultTimes struct {
	FirstFailure time.Duration // from the fault to the first 503/504 answer of a request sent after it
	Outage       time.Duration // from the fault to the first 200 of a request sent after the first failure (0: not measured, the load stopped before the mend for a TopicLoser)
	Mend         time.Duration // how long the restart (or thaw) took
	AfterMend    time.Duration // from the end of the mend to the first 200 of a request sent after it
	Requests     int
}

// RunFaults runs every fault of Faults against host 0 of h under load, each with a fresh mqtarget.
func RunFaults(t *testing.T, h FaultHarness) {
	for _, f := range Faults {
		t.Run(f.Name, func(t *testing.T) { RunFault(t, h, f) })
	}
}

// RunFault puts faultWorkers clients of load on a fresh topic of host 0, breaks the broker with f,
// mends it, and checks:
//   - every answer is 2xx, 503 or 504 (429 on the async endpoints), within publish_timeout and a margin;
//   - no 200 while the broker is dead or frozen;
//   - requests sent after the fault fail (503/504), and after the broker is back requests succeed
//     again on every endpoint, without restarting mqtarget;
//   - once the load stopped and async publishes settled, the goroutine count is back at the baseline
//     measured before the load;
//   - the broker holds exactly what was acknowledged (see checkHeld).
func RunFault(t *testing.T, h FaultHarness, f Fault) FaultTimes {
	tg := StartTarget(t, h, nil)
	topic := uniqueTopic("itfault")
	load := newLoadRun(tg.Base, topic)
	// Warm up: every endpoint once, so connections, routes and topics exist before the baseline.
	// A broker may take longer than publish_timeout to make a fresh topic (one that creates topics in a cluster, on a busy machine):
	// each endpoint is tried until it answers as it should, for a while; the 503/504s are answers
	// like any other for the ledger (what they left in the broker is allowed, not required).
	for _, ep := range faultLoad {
		testwait.Until(t, 30*time.Second, "before the fault: "+ep.path+" answering as it should", func() error {
			if a := load.one(ep); a.err != nil || (a.status != ep.ok && !a.hungUp) {
				return fmt.Errorf("%d %v", a.status, a.err)
			}
			return nil
		})
	}
	waitAsyncSettled(t, tg)
	load.client.CloseIdleConnections()
	baseline, baselineDump := tg.settledGoroutines()

	load.start()
	defer load.stop()
	load.wg.Go(func() { load.watch(func() string { _, g := tg.goroutines(); return g }) })
	began := time.Now()
	waitFor(t, 10*time.Second, "2xx answers under load before the fault", func() bool {
		n := 0
		_, _ = load.find(began, func(a answer) bool {
			if a.err == nil && a.status/100 == 2 {
				n++
			}
			return false
		})
		return n >= 4*faultWorkers
	})

	loser, audit := h.(TopicLoser)
	audit = audit && f.Crash
	if audit && !loser.TopicDurable(t, 0, topic) {
		t.Fatalf("topic %s is not on the broker, durable, before the %s", topic, f.Name)
	}
	var times FaultTimes
	faultAt := time.Now()
	t.Logf("%s at %s", f.Name, faultAt.Format("15:04:05.000"))
	f.Inject(t, h)
	down := time.Now() // the broker is certainly dead or frozen from here until mendAt
	mended := false
	defer func() {
		if !mended {
			f.Mend(t, h)
		}
	}()
	var first answer
	waitFor(t, 2*answerBound, "a 503/504 answer after the fault", func() bool {
		var ok bool
		first, ok = load.find(faultAt, failed)
		return ok
	})
	times.FirstFailure = first.end.Sub(faultAt)
	if f.Hold > 0 {
		waitFor(t, f.Hold+answerBound, "requests held by the fault", func() bool { return time.Since(first.end) >= f.Hold })
	}
	// A broker can take messages again well before its script says it is ready (a start script may
	// probe with admin JVMs for tens of seconds): a watcher stops the load once every endpoint has
	// succeeded again after the first failure, so the rest of the restart does not compete with it.
	recovered := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-load.stopc:
				return
			case <-time.After(20 * time.Millisecond): // polling interval
			}
			if load.recovered(first.end) {
				close(recovered)
				load.halt()
				return
			}
		}
	})
	defer func() { load.halt(); watch.Wait() }()
	if audit {
		load.halt() // nothing may make the topic anew before TopicDurable looks
	}
	mendAt := time.Now()
	f.Mend(t, h)
	mended = true
	back := time.Now()
	times.Mend = back.Sub(mendAt)
	survived := true
	if audit {
		survived = loser.TopicDurable(t, 0, topic)
	} else {
		select {
		case <-recovered:
		case <-time.After(time.Minute):
			t.Errorf("not every endpoint answered 200 again within a minute of the broker's %s", f.Name)
		}
	}
	load.stop()
	watch.Wait()
	if a, ok := load.find(first.end, func(a answer) bool { return a.err == nil && a.status == http.StatusOK }); ok {
		times.Outage = a.end.Sub(faultAt)
	}
	// And after the mend every endpoint succeeds, mqtarget never having been restarted (a broker just
	// restarted may still refuse some sends for a moment: a "broker busy" flow control).
	for _, ep := range faultLoad {
		testwait.Until(t, 30*time.Second, "after the "+f.Name+": "+ep.path, func() error {
			if a := load.one(ep); a.err != nil || (a.status != ep.ok && !a.hungUp) {
				return fmt.Errorf("%d %v, want %d", a.status, a.err, ep.ok)
			}
			return nil
		})
	}
	load.client.CloseIdleConnections()
	if a, ok := load.find(back, func(a answer) bool { return a.err == nil && a.status == http.StatusOK }); ok {
		times.AfterMend = a.end.Sub(back)
	}

	answers := load.snapshot()
	times.Requests = len(answers)
	if !checkAnswers(t, answers) {
		load.mu.Lock()
		t.Logf("the load's ticker ran up to %v late (10 ms ticks: the test process itself was not running for that long)", load.maxGap-10*time.Millisecond)
		if load.late != "" {
			t.Logf("watchdog: %s", load.late)
		}
		load.mu.Unlock()
	}
	// Nothing can have been acknowledged by a broker that was dead or frozen all along (a 202 is only
	// "accepted").
	for _, a := range answers {
		if a.err == nil && a.status == http.StatusOK && a.start.After(down) && a.end.Before(mendAt) {
			t.Errorf("%s: 200 while the broker was down (sent %v after the fault, answered %v before the mend)",
				a.ep.path, a.start.Sub(down), mendAt.Sub(a.end))
		}
	}
	waitAsyncSettled(t, tg)
	slack := goroutineSlack
	if sl, ok := h.(slacker); ok {
		slack = sl.GoroutineSlack()
	}
	if !checkGoroutines(t, tg, baseline, slack) {
		t.Logf("the target's goroutines at the baseline:\n%s", baselineDump)
	}
	var mayLose func(answer) bool // acknowledged messages a crash may take along
	if c, ok := h.(CrashLoser); ok && f.Crash {
		// From CrashLoss before the fault on, answers that came after the kill included: the broker's
		// acknowledgement was on its way when it died (a 3.1.1 client read a PUBACK 11 ms after the
		// kill in CI). A request sent after the kill is never answered 200 (checked above).
		mayLose = func(a answer) bool { return !a.end.Before(faultAt.Add(-c.CrashLoss())) }
	}
	if !survived {
		if r, ok := h.(recoveryReporter); ok {
			t.Logf("the broker's log on its recovery:\n%s", r.RecoveryReport(t))
		}
		t.Skipf("the broker lost topic %s whole in the %s (durable just before it): not mqtarget's doing, nothing to count", topic, f.Name)
	}
	checkHeld(t, h, tg, topic, answers, mayLose)
	again := "the load stopped before the restart (TopicLoser)"
	if !audit {
		again = fmt.Sprintf("first 200 again %v after it", times.Outage.Round(time.Millisecond))
	}
	t.Logf("%s: %d requests; first 503/504 %v after the fault, %s; the mend took %v, first 200 %v after it",
		f.Name, times.Requests, times.FirstFailure.Round(time.Millisecond), again,
		times.Mend.Round(time.Millisecond), times.AfterMend.Round(time.Millisecond))
	return times
}

// equal compares endpoints (they hold a slice, so == does not apply).
func (e loadEndpoint) equal(o loadEndpoint) bool {
	return e.path == o.path && e.msgs == o.msgs && e.hangUp == o.hangUp
}

// checkAnswers: every request got an HTTP answer within answerBound, of an allowed status (2xx, 503,
// 504, 429 on the async endpoints), and no answer is a transport error. It reports whether all held.
func checkAnswers(t *testing.T, answers []answer) bool {
	t.Helper()
	ok := true
	count := map[string]int{}
	for _, a := range answers {
		if a.hungUp {
			count["hung up"]++
			continue
		}
		took := a.end.Sub(a.start)
		if bound := cmp.Or(a.ep.within, answerBound); took > bound {
			t.Errorf("%s: sent at %s, answered %d after %v, want within %v", a.ep.path, a.start.Format("15:04:05.000"), a.status, took, bound)
			ok = false
		}
		if a.err != nil {
			t.Errorf("%s: %v (after %v)", a.ep.path, a.err, took)
			ok = false
			continue
		}
		switch {
		case a.status == a.ep.ok, a.status == http.StatusServiceUnavailable, a.status == http.StatusGatewayTimeout,
			slices.Contains(a.ep.other, a.status):
		default:
			t.Errorf("%s: status %d, want %d, 503 or 504", a.ep.path, a.status, a.ep.ok)
			ok = false
		}
		count[strconv.Itoa(a.status)]++
	}
	t.Logf("answers by status: %v", count)
	return ok
}

// waitAsyncSettled waits until every accepted async publish has completed: mqtarget_async_in_flight 0 and
// accepted = acked + failed.
func waitAsyncSettled(t *testing.T, tg *Target) {
	t.Helper()
	testwait.Until(t, answerBound+10*time.Second, "async publishes settled", func() error {
		m := asyncMetrics(t, tg)
		if m["in_flight"] != 0 || m["accepted"] != m["acked"]+m["failed"] {
			return fmt.Errorf("async metrics %v", m)
		}
		return nil
	})
}

// asyncMetrics reads mqtarget_async_messages_total by result, and mqtarget_async_in_flight.
func asyncMetrics(t testing.TB, tg *Target) map[string]float64 {
	t.Helper()
	resp, err := client.Get(tg.Base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if r, ok := strings.CutPrefix(name, `mqtarget_async_messages_total{result="`); ok {
			name = strings.TrimSuffix(r, `"}`)
		} else if name != "mqtarget_async_in_flight" {
			continue
		} else {
			name = "in_flight"
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("metric %q: %v", line, err)
		}
		out[name] = f
	}
	return out
}

// goroutineSlack is how many goroutines more than the baseline still count as "back at it": timers and
// connection goroutines of the broker clients come and go on their own.
const goroutineSlack = 10

// settleGoroutines bounds the wait for the goroutine count to come back.
const settleGoroutines = 30 * time.Second

// settledGoroutines returns the target's goroutine count once it stopped falling (HTTP connections
// closing), and their stacks.
func (tg *Target) settledGoroutines() (int, string) {
	n, dump := tg.goroutines()
	for range 20 {
		time.Sleep(25 * time.Millisecond) // sampling interval, not synchronisation
		m, d := tg.goroutines()
		if m >= n {
			return n, dump
		}
		n, dump = m, d
	}
	return n, dump
}

// checkGoroutines waits until the target's goroutine count is back within slack of baseline, and
// prints its goroutines when it does not come back (false).
func checkGoroutines(t *testing.T, tg *Target, baseline, slack int) bool {
	t.Helper()
	// Past the broker clients' idle-connection reaping (franz-go closes a connection idle for 20 s).
	end := time.Now().Add(settleGoroutines)
	for {
		n, dump := tg.goroutines()
		if n <= baseline+slack {
			t.Logf("the target's goroutines: %d, baseline %d", n, baseline)
			return true
		}
		if time.Now().After(end) {
			t.Errorf("the target's goroutines: %d, baseline %d (+%d allowed), %v after the load stopped:\n%s", n, baseline, slack, settleGoroutines, dump)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkHeld consumes the topic and compares the broker's messages with the answers. What mqtarget
// promises across a fault, and what is asserted:
//   - every id of a 2xx answer (sync endpoints, /sendAsyncWait) is in the broker exactly once;
//   - every id of a 202 (/sendAsync) is there at most once, and those missing are no more than the
//     async publishes mqtarget counted as failed (an accepted message is never lost silently);
//   - a request answered 503 or 504, or whose client hung up, names no ids, and its messages may or may
//     not be stored: a 504 is a publish still in flight when publish_timeout ran out (a frozen broker
//     stores it after the thaw), a 503 can follow a write the broker stored before it died without
//     answering, and a client's leaving cancels nothing handed to the broker client. Their ids are
//     the ones of this mqtarget run (one message.Source) given to no 2xx answer; each may be there at
//     most once, and at least the messages a partly failed request reported as published are;
//   - nothing else: no duplicate, no id of another run, no id beyond those handed out.
func checkHeld(t *testing.T, h FaultHarness, tg *Target, topic string, answers []answer, mayLose func(answer) bool) {
	t.Helper()
	acked, accepted, crashed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	answeredAt := map[string]time.Time{}
	// messages the answered requests took ids for; acknowledged by failed requests (not lost to a crash)
	issued, partial := 0, 0
	var run uint32
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		issued += a.ep.msgs
		if mayLose == nil || !mayLose(a) { // those answered around a kill may have gone with the broker
			partial += a.published
		}
		for _, id := range a.ids {
			n, err := message.ParseID(id)
			if err != nil {
				t.Fatalf("reply id %q: %v", id, err)
			}
			run = message.Run(n)
			answeredAt[id] = a.end
			crashed[id] = mayLose != nil && mayLose(a)
			if a.status == http.StatusAccepted {
				accepted[id] = true
			} else {
				acked[id] = true
			}
		}
	}
	bodies := h.ConsumeAll(t, 0, topic, len(acked))
	seen := map[string]int{}
	stray, unacked, acceptedHeld, acceptedCrashLost := 0, 0, 0, 0
	for _, body := range bodies {
		id, _, err := message.Parse(body)
		if err != nil {
			t.Errorf("unparsable message %q: %v", body[:min(len(body), 40)], err)
			continue
		}
		if seen[id]++; seen[id] == 2 {
			t.Errorf("message %s stored more than once", id)
		}
		if seen[id] > 1 {
			continue
		}
		n, _ := message.ParseID(id)
		switch {
		case acked[id]:
		case accepted[id]:
			acceptedHeld++
		case message.Run(n) != run || message.Seq(n) == 0 || message.Seq(n) > uint64(issued):
			stray++
			t.Errorf("message %s was never sent by this run (run %06x, %d ids handed out)", id, run, issued)
		default:
			unacked++
		}
	}
	missing, crashLost := 0, 0
	for id := range acked {
		if seen[id] == 0 && crashed[id] {
			crashLost++
		} else if seen[id] == 0 {
			missing++
			if missing <= 10 {
				t.Errorf("acknowledged message %s (answered %s) is not in the broker", id, answeredAt[id].Format("15:04:05.000"))
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged messages are not in the broker", missing, len(acked))
		if r, ok := h.(recoveryReporter); ok {
			t.Logf("the broker's log on its recovery:\n%s", r.RecoveryReport(t))
		}
	}
	for id := range accepted {
		if seen[id] == 0 && crashed[id] {
			acceptedCrashLost++
		}
	}
	m := asyncMetrics(t, tg)
	if lost := len(accepted) - acceptedHeld; float64(lost) > m["failed"]+float64(acceptedCrashLost) {
		t.Errorf("%d accepted async messages are not in the broker, but only %v async publishes failed (and %d were accepted just before the kill)",
			lost, m["failed"], acceptedCrashLost)
	}
	if unacked < partial {
		t.Errorf("%d messages of failed requests stored, but those requests reported %d published", unacked, partial)
	}
	if crashLost+acceptedCrashLost > 0 {
		t.Logf("%d acknowledged and %d accepted messages answered just before the kill are not in the broker (CrashLoser)", crashLost, acceptedCrashLost)
	}
	t.Logf("broker holds %d messages: %d of %d acknowledged, %d of %d accepted async (%v failed), %d of the %d of 503/504 answers and hung-up requests",
		len(bodies), len(acked)-missing-crashLost, len(acked), acceptedHeld, len(accepted), m["failed"], unacked,
		issued-len(acked)-len(accepted))
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("not yet")
	})
}
