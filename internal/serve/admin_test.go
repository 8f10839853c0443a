package serve

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/config"
)

func shutdownApp(t *testing.T, a *App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestAdminListener: with http.admin_addr set, /healthz, /readyz and /metrics answer there and not on
// http.addr, the send endpoints the other way round; Shutdown closes both listeners.
func TestAdminListener(t *testing.T) {
	before := listeningPorts(t)
	a := startApp(t, func(c *config.Config) { c.HTTP.AdminAddr = "127.0.0.1:0" })
	main, admin := "http://"+a.Addr(), "http://"+a.AdminAddr()
	if a.AdminAddr() == a.Addr() {
		t.Fatalf("AdminAddr() = Addr() = %s", a.Addr())
	}
	want := map[int]bool{portOf(t, a.Addr()): true, portOf(t, a.AdminAddr()): true}
	for p := range listeningPorts(t) {
		if !before[p] && !want[p] {
			t.Errorf("Start opened an unexpected listener on port %d", p)
		}
	}
	for _, tc := range []struct {
		name, url string
		status    int
	}{
		{"healthz on admin", admin + "/healthz", 200},
		{"metrics on admin", admin + "/metrics", 200},
		// The brokers at 127.0.0.1:1 never answer, so /readyz says 503, with its JSON: it is served.
		{"readyz on admin", admin + "/readyz", 503},
		{"healthz not on main", main + "/healthz", 404},
		{"readyz not on main", main + "/readyz", 404},
		{"metrics not on main", main + "/metrics", 404},
		{"index on main", main + "/", 200},
		{"send not on admin", admin + "/send1", 404},
		{"index not on admin", admin + "/", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := httpGet(t, tc.url); code != tc.status {
				t.Errorf("GET %s: %d, want %d: %.200s", tc.url, code, tc.status, body)
			}
		})
	}
	shutdownApp(t, a)
	for p := range listeningPorts(t) {
		if want[p] {
			t.Errorf("port %d still listening after Shutdown", p)
		}
	}
}

// TestAdminUnset: without http.admin_addr the admin routes are on http.addr and AdminAddr says so.
func TestAdminUnset(t *testing.T) {
	a := startApp(t, func(*config.Config) {})
	defer shutdownApp(t, a)
	if a.AdminAddr() != a.Addr() {
		t.Errorf("AdminAddr() = %s, want Addr() %s", a.AdminAddr(), a.Addr())
	}
	if code, _ := httpGet(t, "http://"+a.Addr()+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics on http.addr: %d", code)
	}
}

// TestAuthTokenFile: the token file is read at start and guards the send endpoints; an empty one fails
// Start naming the setting.
func TestAuthTokenFile(t *testing.T) {
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("empty file", func(t *testing.T) {
		cfg := testConfig(func(c *config.Config) { c.HTTP.AuthTokenFile = empty })
		if _, err := Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil ||
			!strings.HasPrefix(err.Error(), "http.auth_token_file: ") {
			t.Fatalf("Start = %v, want an error naming http.auth_token_file", err)
		}
	})

	a := startApp(t, func(c *config.Config) { c.HTTP.AuthTokenFile = good; c.PublishTimeout = time.Second })
	defer shutdownApp(t, a)
	for _, tc := range []struct {
		name, path, token string
		status            int
	}{
		{"no token", "/send1", "", http.StatusUnauthorized},
		{"wrong token", "/send1", "tok-12", http.StatusUnauthorized},
		// Past the check the unreachable broker answers: 503.
		{"the file's token, trimmed", "/send1", "tok-123", http.StatusServiceUnavailable},
		{"healthz open", "/healthz", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+a.Addr()+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}
