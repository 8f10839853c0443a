package publishertest

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// tracker records the PublishAsync calls of a check and every run of their done callbacks.
type tracker struct {
	mu      sync.Mutex
	calls   []call
	changed chan struct{} // a call returned or a done ran; buffered 1, so waiters never miss the latest
}

// call is one PublishAsync: accepted when PublishAsync returned nil; calls counts its done's runs.
type call struct {
	body     []byte
	accepted bool
	returned bool // PublishAsync has returned
	calls    int
	err      error     // of the first run
	at       time.Time // of the first run
}

// publish calls PublishAsync and records the outcome.
func (k *tracker) publish(p publishers.Publisher, host int, topic string, body []byte) error {
	k.mu.Lock()
	if k.changed == nil {
		k.changed = make(chan struct{}, 1)
	}
	i := len(k.calls)
	k.calls = append(k.calls, call{body: body})
	k.mu.Unlock()
	err := p.PublishAsync(host, topic, body, func(err error) {
		k.mu.Lock()
		c := &k.calls[i]
		c.calls++
		if c.calls == 1 {
			c.err, c.at = err, time.Now()
		}
		k.mu.Unlock()
		k.notify()
	})
	k.mu.Lock()
	k.calls[i].accepted, k.calls[i].returned = err == nil, true
	k.mu.Unlock()
	k.notify()
	return err
}

func (k *tracker) notify() {
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

func (k *tracker) snapshot() []call {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]call(nil), k.calls...)
}

// wait returns when ok(snapshot) holds or d has passed, reporting which.
func (k *tracker) wait(d time.Duration, ok func([]call) bool) bool {
	k.mu.Lock()
	if k.changed == nil {
		k.changed = make(chan struct{}, 1)
	}
	changed := k.changed
	k.mu.Unlock()
	timeout := time.After(d)
	for {
		if ok(k.snapshot()) {
			return true
		}
		select {
		case <-changed:
		case <-timeout:
			return ok(k.snapshot())
		}
	}
}

// waitAll waits until the done of every accepted publish has run, at most d; the checks after it report
// which did not.
func (k *tracker) waitAll(t *testing.T, d time.Duration) {
	t.Helper()
	k.wait(d, func(cs []call) bool {
		for _, c := range cs {
			if !c.returned || (c.accepted && c.calls == 0) {
				return false
			}
		}
		return true
	})
}

// waitAcked waits until n publishes were acknowledged, failing the test after d.
func (k *tracker) waitAcked(t *testing.T, n int, d time.Duration) {
	t.Helper()
	var last int
	if !k.wait(d, func(cs []call) bool {
		last = 0
		for _, c := range cs {
			if c.calls > 0 && c.err == nil {
				last++
			}
		}
		return last >= n
	}) {
		t.Fatalf("%d of %d PublishAsync acknowledged within %v", last, n, d)
	}
}

// verifyOnce fails the test for a done that ran more than once, or at all for a refused publish, or not
// at all for an accepted one; one line per kind of fault, with a few examples.
func (k *tracker) verifyOnce(t *testing.T) {
	t.Helper()
	var notReturned, refusedRan, neverRan, ranTwice []string
	for i, c := range k.snapshot() {
		switch {
		case !c.returned:
			notReturned = append(notReturned, fmt.Sprintf("#%d", i))
		case !c.accepted && c.calls > 0:
			refusedRan = append(refusedRan, fmt.Sprintf("#%d ran %d times, first with %v", i, c.calls, c.err))
		case c.accepted && c.calls == 0:
			neverRan = append(neverRan, fmt.Sprintf("#%d", i))
		case c.calls > 1:
			ranTwice = append(ranTwice, fmt.Sprintf("#%d ran %d times, first with %v", i, c.calls, c.err))
		}
	}
	report(t, "PublishAsync calls have not returned", notReturned)
	report(t, "PublishAsync calls returned an error, yet their done ran", refusedRan)
	report(t, "PublishAsync calls were accepted and their done never ran", neverRan)
	report(t, "PublishAsync calls had their done run more than once", ranTwice)
}

// report fails the test with how many of what there are, and a few examples.
func report(t *testing.T, what string, list []string) {
	t.Helper()
	if len(list) > 0 {
		t.Errorf("%d %s, e.g. %q", len(list), what, list[:min(3, len(list))])
	}
}

func countAccepted(cs []call) int {
	n := 0
	for _, c := range cs {
		if c.accepted {
			n++
		}
	}
	return n
}

// expectExactly consumes topic on host and fails the test unless the broker holds exactly want: every
// message once, nothing else.
func expectExactly(t *testing.T, b Broker, host int, topic string, want [][]byte) {
	t.Helper()
	expectWithin(t, b, host, topic, want, nil)
}

// expectWithin consumes topic on host and fails the test unless every message of must is there exactly
// once, and anything else is from may, at most once.
func expectWithin(t *testing.T, b Broker, host int, topic string, must, may [][]byte) {
	t.Helper()
	got := b.Consume(t, host, topic, len(must), consumeTimeout)
	seen := map[string]int{}
	for _, m := range got {
		seen[string(m)]++
	}
	allowed := map[string]bool{}
	for _, m := range may {
		allowed[string(m)] = true
	}
	var missing, dup, extra []string
	for _, m := range must {
		if seen[string(m)] == 0 {
			missing = append(missing, string(m))
		}
	}
	mustSet := map[string]bool{}
	for _, m := range must {
		mustSet[string(m)] = true
	}
	for m, n := range seen {
		switch {
		case !mustSet[m] && !allowed[m]:
			extra = append(extra, m)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s (x%d)", m, n))
		}
	}
	for _, l := range [][]string{missing, dup, extra} {
		sort.Strings(l)
	}
	on := fmt.Sprintf("on the broker (host %d topic %s)", host, topic)
	report(t, "acknowledged messages are missing "+on, missing)
	report(t, "messages are more than once "+on, dup)
	report(t, "messages were never published, yet are "+on, extra)
	if len(missing)+len(dup)+len(extra) > 0 {
		t.Logf("host %d topic %s: broker holds %d, acknowledged %d (%d more may have arrived)", host, topic, len(got), len(must), len(may))
	}
}
