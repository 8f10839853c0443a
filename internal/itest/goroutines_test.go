package itest

import (
	"strings"
	"sync"
	"testing"
)

func TestLabelledGoroutines(t *testing.T) {
	stop := make(chan struct{})
	var wg, running sync.WaitGroup
	start := func(n int) {
		for range n {
			running.Add(1)
			wg.Go(func() { running.Done(); <-stop })
		}
	}
	mine := labelled(func() {
		start(3)
		running.Add(1)
		wg.Go(func() { start(2); running.Done(); <-stop }) // started by a goroutine of the target: labelled too
	})
	other := labelled(func() { start(4) })
	start(5) // the test's own
	defer func() { close(stop); wg.Wait() }()
	running.Wait()

	for _, c := range []struct {
		name string
		id   string
		want int
	}{
		{"the target and its descendants", mine, 6},
		{"another target", other, 4},
		{"no such target", "999999", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := &Target{label: c.id}
			n, dump := tg.goroutines()
			if n != c.want {
				t.Fatalf("goroutines = %d, want %d:\n%s", n, c.want, dump)
			}
			if c.want > 0 && !strings.Contains(dump, "TestLabelledGoroutines") {
				t.Fatalf("dump without the goroutines' stacks:\n%s", dump)
			}
		})
	}
}
