package itest

import (
	"testing"

	"github.com/mqtarget/mqtarget/internal/testlane"
)

// Lanes let the real-broker tests overlap: most of their time is waiting on a broker (answers,
// restarts, timeouts), and a test of one broker need not wait for one of another. A test in lanes runs in
// parallel (t.Parallel) with the tests of other lanes and one after the other with those sharing a lane
// with it, here and in the other packages' integration tests (testlane: a lane is a broker the tests
// may stop, freeze or fill). A test that is not parallel holds up every parallel one (Go runs those
// after the package's sequential tests): the fault tests count only their own target's goroutines
// (goroutines.go) so that they can run in lanes, and the conformance suite, whose leak check looks at
// the whole process, runs in each broker's own package.
//
// scripts/test.sh gives go test -parallel 4: a test waiting for its lane holds one of those.

// Lane makes t a parallel test holding the named lanes until it ends. Call it first, once, with
// every broker the test uses.
func Lane(t *testing.T, names ...string) {
	t.Helper()
	t.Parallel()
	testlane.Lock(t, names...)
}
