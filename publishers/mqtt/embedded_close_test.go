package mqtt

import (
	"sync"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestEmbeddedCloseWhileClientsComeAndGo: Close ends, in time and without error, while clients keep
// connecting and disconnecting. mochi-mqtt v2.7.9's Close lists a listener's clients under the clients'
// read lock taken twice (Clients.GetByListener calls Len); a client added or removed in between waits for
// the write lock and hangs both, and with them Close (stop 25's landing CI: Close gave up after closeWait).
func TestEmbeddedCloseWhileClientsComeAndGo(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for round := range rounds {
		e, err := StartEmbedded(1, EmbeddedOptions{MaxMessageSize: 1 << 20}, discard())
		if err != nil {
			t.Fatal(err)
		}
		addr := e.Addrs()[0]
		var mu sync.Mutex
		connected := 0
		stop := publishertest.Loop(6, func() {
			if connects(addr) == nil {
				mu.Lock()
				connected++
				mu.Unlock()
			}
		})
		deadline := time.Now().Add(5 * time.Second)
		for { // churn under way before Close
			mu.Lock()
			n := connected
			mu.Unlock()
			if n >= 20 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		err = e.Close()
		took := time.Since(start)
		stop()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if took > closeWait/2 {
			t.Fatalf("round %d: Close took %v", round, took)
		}
		if connected < 20 {
			t.Fatalf("round %d: only %d clients connected before Close", round, connected)
		}
	}
}
