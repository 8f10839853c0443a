package app

import (
	"testing"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/publishers"
)

// TestEveryEmbeddedModeHasAServer keeps embedders in step with the registry: every entry that runs
// embedded by default has a server here, and every server here belongs to a registry entry.
func TestEveryEmbeddedModeHasAServer(t *testing.T) {
	cfg := config.Default()
	inRegistry := map[*publishers.Broker]bool{}
	for _, b := range publishers.Brokers {
		inRegistry[b] = true
		t.Run(b.Name, func(t *testing.T) {
			if n := b.Embedded(&cfg.Sections); n > 0 && embedders[b] == nil {
				t.Errorf("%s runs %d embedded servers by default but has no embedder", b.Name, n)
			}
		})
	}
	for b := range embedders {
		if !inRegistry[b] {
			t.Errorf("embedder for %s, which is not in publishers.Brokers", b.Name)
		}
	}
}
