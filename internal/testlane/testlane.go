// Package testlane gives tests of different packages (go test runs packages in parallel, each in a
// process of its own) and parallel tests of one package turns at a real broker that one of them may
// stop, freeze or fill: a lane per broker, held for a whole test. A lane is an exclusive flock(2) on a
// file named after it in the temp dir, so it holds across processes and within one.
package testlane

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	mu   sync.Mutex
	held = map[string]string{} // lane → the test holding it in this process
)

// holds: t or a test it runs under holds lane already (a helper taking it again must not wait on it).
func holds(t testing.TB, lane string) bool {
	mu.Lock()
	defer mu.Unlock()
	h, ok := held[lane]
	return ok && (t.Name() == h || strings.HasPrefix(t.Name(), h+"/"))
}

// Lock holds the named lanes until t ends, waiting for each in turn. Call it once, first, with every
// broker the test uses: taken in sorted order, two tests never wait on each other. A lane t (or a test
// it runs under) holds already is not taken again, so helpers may call Lock too.
func Lock(t testing.TB, names ...string) {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "mqtarget-test-lanes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testlane: %v", err)
	}
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		if holds(t, n) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, n), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("testlane %s: %v", n, err)
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if err != syscall.EINTR {
				break
			}
		}
		if err != nil {
			f.Close()
			t.Fatalf("testlane %s: %v", n, err)
		}
		mu.Lock()
		held[n] = t.Name()
		mu.Unlock()
		t.Cleanup(func() {
			mu.Lock()
			delete(held, n)
			mu.Unlock()
			f.Close() // releases the lock
		})
	}
}
