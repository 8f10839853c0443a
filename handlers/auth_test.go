package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/handlers"
)

// serveWith serves one GET with the given Authorization header ("" for none) on h.
func serveWith(h http.Handler, target, authorization string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestBearerToken: with a token set, send endpoints need it (401 with a Bearer challenge and a JSON
// error otherwise, and nothing is published); health, readiness and metrics stay open.
func TestBearerToken(t *testing.T) {
	const token = "s3cret-token"
	for _, tc := range []struct {
		name, target, authorization string
		status                      int
		challenge                   string // WWW-Authenticate on a 401
	}{
		{"send without header", "/send1", "", 401, `Bearer realm="mqtarget"`},
		{"send with the token", "/send1", "Bearer " + token, 200, ""},
		{"scheme is case-insensitive", "/send1", "bearer " + token, 200, ""},
		{"send with a wrong token", "/send1", "Bearer s3cret-tokeN", 401, `Bearer realm="mqtarget", error="invalid_token"`},
		{"send with a prefix of the token", "/send1", "Bearer s3cret", 401, `Bearer realm="mqtarget", error="invalid_token"`},
		{"send with the token and more", "/send1", "Bearer " + token + "x", 401, `Bearer realm="mqtarget", error="invalid_token"`},
		{"send with an empty token", "/send1", "Bearer ", 401, `Bearer realm="mqtarget", error="invalid_token"`},
		{"basic auth instead", "/send1", "Basic czNjcmV0LXRva2Vu", 401, `Bearer realm="mqtarget"`},
		{"scheme alone", "/send1", "Bearer", 401, `Bearer realm="mqtarget"`},
		{"every send endpoint: send2", "/send2", "", 401, `Bearer realm="mqtarget"`},
		{"every send endpoint: sendAsync", "/sendAsync", "", 401, `Bearer realm="mqtarget"`},
		{"every send endpoint: send3Host", "/send3Host", "", 401, `Bearer realm="mqtarget"`},
		{"healthz open", "/healthz", "", 200, ""},
		{"readyz open", "/readyz", "", 200, ""},
		{"metrics open", "/metrics", "", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newServer(t, newFake(3), func(o *handlers.Options) { o.AuthToken = token })
			w := serveWith(ts.srv, tc.target, tc.authorization)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if tc.status != http.StatusUnauthorized {
				return
			}
			m := strictJSON(t, w.Body.Bytes())
			if m["field"] != "http.auth_token_file" {
				t.Errorf("field %v, want http.auth_token_file: %v", m["field"], m)
			}
			if strings.Contains(w.Body.String(), token) {
				t.Errorf("reply shows the token: %s", w.Body)
			}
			if c := ts.pub.Calls(); len(c) != 0 {
				t.Errorf("published without the token: %v", summarize(c))
			}
		})
	}
}

// TestNoTokenNoAuth: without a token the send endpoints are open, whatever the client sends.
func TestNoTokenNoAuth(t *testing.T) {
	ts := newServer(t, newFake(1))
	for _, a := range []string{"", "Bearer anything"} {
		if w := serveWith(ts.srv, "/send1", a); w.Code != http.StatusOK {
			t.Errorf("Authorization %q: status %d: %s", a, w.Code, w.Body)
		}
	}
}

// TestAdminSeparate: with AdminSeparate the admin routes are served by AdminHandler only, and the send
// endpoints and the index by the main handler only.
func TestAdminSeparate(t *testing.T) {
	ts := newServer(t, newFake(3), func(o *handlers.Options) { o.AdminSeparate = true })
	admin := ts.srv.AdminHandler()
	if admin == nil {
		t.Fatal("AdminHandler() = nil with AdminSeparate")
	}
	for _, e := range handlers.Endpoints() {
		t.Run(e.Path, func(t *testing.T) {
			onMain, onAdmin := serveWith(ts.srv, e.Path, ""), serveWith(admin, e.Path, "")
			wantMain, wantAdmin := http.StatusOK, http.StatusNotFound
			if e.Admin {
				wantMain, wantAdmin = http.StatusNotFound, http.StatusOK
			}
			if e.Path == "/sendRoundTrip" { // no round trips configured: its 501 shows it is routed on main
				wantMain = http.StatusNotImplemented
			}
			if e.Path == "/sendAsync" {
				wantMain = http.StatusAccepted
			}
			if onMain.Code != wantMain {
				t.Errorf("main listener: status %d, want %d: %s", onMain.Code, wantMain, onMain.Body)
			}
			if onAdmin.Code != wantAdmin {
				t.Errorf("admin listener: status %d, want %d: %s", onAdmin.Code, wantAdmin, onAdmin.Body)
			}
			if wantMain == http.StatusNotFound {
				strictJSON(t, onMain.Body.Bytes())
			}
		})
	}
	// The admin routes are the health checks and the metrics; the metrics still see the main listener's requests.
	var admins []string
	for _, e := range handlers.Endpoints() {
		if e.Admin {
			admins = append(admins, e.Path)
		}
	}
	if strings.Join(admins, " ") != "/healthz /readyz /metrics" {
		t.Errorf("admin routes %v, want /healthz /readyz /metrics", admins)
	}
	if body := serveWith(admin, "/metrics", "").Body.String(); !strings.Contains(body, `route="/send1"`) {
		t.Errorf("admin /metrics lacks the main listener's /send1 requests:\n%s", body)
	}
}

// TestAdminTogether: without AdminSeparate there is no admin handler and every route is on the main one.
func TestAdminTogether(t *testing.T) {
	ts := newServer(t, newFake(1))
	if h := ts.srv.AdminHandler(); h != nil {
		t.Errorf("AdminHandler() = %v without AdminSeparate", h)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/"} {
		if w := serveWith(ts.srv, p, ""); w.Code != http.StatusOK {
			t.Errorf("%s: status %d", p, w.Code)
		}
	}
}
