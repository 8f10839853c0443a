package closedloop

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestServe: the floor's /send1 is one send per request with a sender of the pool, 200 "ok" or 503
// with the error; /healthz sends nothing; the server ends with ctx.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sends atomic.Int64
	var fail atomic.Bool
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serveOn(ctx, ln, 2, func(i int) error {
			if i < 0 || i > 1 {
				t.Errorf("sender %d: not of the pool of 2", i)
			}
			sends.Add(1)
			if fail.Load() {
				return errors.New("broker said no")
			}
			return nil
		})
	}()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path string
		fail       bool
		code       int
		body       string
		sends      int64
	}{
		{"healthz sends nothing", "/healthz", false, 200, "ok", 0},
		{"send1 sends one", "/send1", false, 200, "ok", 1},
		{"a failed send is 503 with its error", "/send1", true, 503, "broker said no\n", 2},
		{"no other route", "/send2", false, 404, "404 page not found\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail.Store(tc.fail)
			code, body := get(tc.path)
			if code != tc.code || body != tc.body || sends.Load() != tc.sends {
				t.Fatalf("GET %s: %d %q after %d sends, want %d %q after %d", tc.path, code, body, sends.Load(), tc.code, tc.body, tc.sends)
			}
		})
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after ctx ended: %v", err)
	}
}

func TestServeLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:80", "nohost"} {
		if err := Serve(t.Context(), addr, 1, func(int) error { return nil }); err == nil {
			t.Errorf("Serve(%q): no error, want a loopback-only refusal", addr)
		}
	}
}
