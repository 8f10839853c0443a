package handlers_test

import (
	"net/http"
	"testing"

	"github.com/mqtarget/mqtarget/handlers"
)

// TestAsyncBytesLimit: the bytes of async publishes in flight are bounded as well as their count, so
// large ?size= cannot make the async limit hold gigabytes; the bytes come back as publishes complete.
func TestAsyncBytesLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sizes     []string // ?size= of the requests held in flight, in order
		next      string   // the next request's ?size=
		want      int
		wantField string
	}{
		{"under the bound", []string{"1000", "1000"}, "1000", http.StatusAccepted, ""},
		{"a large message past the bound", []string{"1000", "1000"}, "3500", http.StatusTooManyRequests, "async.max_in_flight_bytes"},
		{"exactly the bound", []string{"2000", "2000"}, "1000", http.StatusAccepted, ""},
		{"one byte past it", []string{"2000", "2000"}, "1001", http.StatusTooManyRequests, "async.max_in_flight_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(1)
			f.async = asyncHold
			ts := newServer(t, f, func(o *handlers.Options) { o.AsyncLimit, o.AsyncMaxBytes, o.MaxMessageSize = 100, 5000, 5000 })
			for _, size := range tc.sizes {
				if w := ts.do(http.MethodGet, "/sendAsync?size="+size, ""); w.Code != http.StatusAccepted {
					t.Fatalf("size %s: status %d: %s", size, w.Code, w.Body)
				}
			}
			w := ts.do(http.MethodGet, "/sendAsync?size="+tc.next, "")
			if w.Code != tc.want {
				t.Fatalf("size %s: status %d, want %d: %s", tc.next, w.Code, tc.want, w.Body)
			}
			if tc.wantField != "" {
				if r := decode(t, w); field(r) != tc.wantField {
					t.Errorf("field %q, want %q", field(r), tc.wantField)
				}
			}
			f.release(nil)
			if w := ts.do(http.MethodGet, "/sendAsync?size=5000", ""); w.Code != http.StatusAccepted {
				t.Errorf("after the publishes completed: status %d: %s", w.Code, w.Body)
			}
			f.release(nil)
		})
	}
}
