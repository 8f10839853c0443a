package publishers_test

import (
	"fmt"
	"testing"

	"github.com/mqtarget/mqtarget/publishers"
)

// TestRefusals: a refusal is remembered with the broker's words; past MaxRefusals the oldest is
// forgotten, so a client naming ever new forbidden topics cannot grow it.
func TestRefusals(t *testing.T) {
	var r publishers.Refusals
	if r.Has("a") {
		t.Fatal("an empty Refusals holds a")
	}
	r.Add("a", "not permitted")
	if why, _, ok := r.Get("a"); !ok || why != "not permitted" {
		t.Fatalf("Get(a) = %q, %v", why, ok)
	}
	for i := range publishers.MaxRefusals {
		r.Add(fmt.Sprint("t", i), "x")
	}
	if r.Has("a") {
		t.Error("the oldest refusal is kept past MaxRefusals")
	}
	n := 0
	for i := range publishers.MaxRefusals {
		if r.Has(fmt.Sprint("t", i)) {
			n++
		}
	}
	if n != publishers.MaxRefusals {
		t.Errorf("%d of the last %d refusals kept", n, publishers.MaxRefusals)
	}
}
