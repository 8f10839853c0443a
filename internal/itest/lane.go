package itest

import (
	"slices"
	"sync"
	"testing"
)

// Lanes let the real-broker tests overlap: most of their time is waiting on a broker (answers,
// restarts, timeouts), and a test of RocketMQ need not wait for one of Artemis. A test in lanes runs in
// parallel (t.Parallel) with the tests of other lanes and one after the other with those sharing a lane
// with it: a lane is a broker the tests may stop, freeze or fill. Tests that look at the whole process
// (the conformance suite's leak check, the fault tests' goroutine count) take no lane: Go runs every
// test that is not parallel first, one at a time, before any parallel one starts.
//
// scripts/test.sh gives go test -parallel laneParallel: a test waiting for its lane holds one of those.

var lanes sync.Map // name → *sync.Mutex

// Lane makes t a parallel test holding the named lanes until it ends. Call it first, once, with
// every broker the test uses (taken in sorted order, so two tests never wait on each other).
func Lane(t *testing.T, names ...string) {
	t.Helper()
	t.Parallel()
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	for _, n := range names {
		mu, _ := lanes.LoadOrStore(n, new(sync.Mutex))
		mu.(*sync.Mutex).Lock()
	}
	t.Cleanup(func() { // registered first: runs after every cleanup of the test (a broker restarted)
		for _, n := range names {
			mu, _ := lanes.Load(n)
			mu.(*sync.Mutex).Unlock()
		}
	})
}
