package nats_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/nats"
)

// TestStreamMessages: the count is the named stream's, from any account; a missing stream is 0; a
// monitor that fails or answers garbage is an error, never a count.
func TestStreamMessages(t *testing.T) {
	const jsz = `{"account_details":[{"stream_detail":[{"name":"other","state":{"messages":7}}]},` +
		`{"stream_detail":[{"name":"s1","state":{"messages":42}}]}]}`
	for _, tc := range []struct {
		name, stream, body string
		status             int
		want               int
		err                string
	}{
		{"a stream of the second account", "s1", jsz, 200, 42, ""},
		{"no such stream", "s2", jsz, 200, 0, ""},
		{"not 200", "s1", jsz, 503, 0, "503"},
		{"garbage", "s1", "<html>", 200, 0, "/jsz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/jsz" || r.URL.Query().Get("streams") != "true" {
					http.Error(w, "wrong request "+r.URL.String(), http.StatusBadRequest)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			got, err := nats.StreamMessages(t.Context(), srv.Client(), strings.TrimPrefix(srv.URL, "http://"), tc.stream)
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("got %d, %v; want %d and an error containing %q", got, err, tc.want, tc.err)
			}
		})
	}
}
