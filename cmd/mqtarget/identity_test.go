package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mqtarget/mqtarget/internal/version"
)

func TestVersion(t *testing.T) {
	want := version.Get().String() + "\n"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"flag", []string{"-version"}},
		{"flag beside an invalid setting", []string{"-version", "-message.size", "0"}},
		{"subcommand", []string{"version"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d, stderr %s", code, stderr.String())
			}
			if stdout.String() != want {
				t.Errorf("printed %q, want %q", stdout.String(), want)
			}
		})
	}
}

func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.WriteHeader(http.StatusOK)
		case "/readyz":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	var landed atomic.Int64
	healthyElsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { landed.Add(1) }))
	defer healthyElsewhere.Close()
	redirecting := httptest.NewServer(http.RedirectHandler(healthyElsewhere.URL+"/healthz", http.StatusFound))
	defer redirecting.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	defer tlsSrv.Close()
	tlsAddr := strings.TrimPrefix(tlsSrv.URL, "https://")
	closed := httptest.NewServer(http.NotFoundHandler())
	closedAddr := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()

	for _, tc := range []struct {
		name       string
		args       []string
		want       int
		wantStderr string
	}{
		{"healthz 200", []string{addr}, 0, ""},
		{"readyz 503", []string{"-path", "/readyz", addr}, 1, ""},
		{"https listener", []string{"-https", tlsAddr}, 0, ""},
		{"plain HTTP to an https listener", []string{tlsAddr}, 1, ""},
		{"unknown path 404", []string{"-path", "/nope", addr}, 1, ""},
		{"redirect not followed", []string{strings.TrimPrefix(redirecting.URL, "http://")}, 1, ""},
		{"nothing listening", []string{closedAddr}, 1, "connection refused"},
		{"bad address", []string{"localhost"}, 2, "address:"},
		{"bad path", []string{"-path", "healthz", addr}, 2, "-path:"},
		{"bad timeout", []string{"-timeout", "0s", addr}, 2, "-timeout:"},
		{"two addresses", []string{addr, addr}, 2, "one address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"healthcheck"}, tc.args...), &stdout, &stderr)
			if code != tc.want {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantStderr)
			}
		})
	}
	if n := landed.Load(); n != 0 {
		t.Errorf("%d probes followed a redirect to another listener", n)
	}
}
