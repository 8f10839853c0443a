package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// bearer checks "Authorization: Bearer <token>" against the configured token.
type bearer struct {
	sum [sha256.Size]byte // of the token: comparing digests keeps the compare constant-time in the length too
}

func newBearer(token string) *bearer {
	if token == "" {
		return nil
	}
	return &bearer{sum: sha256.Sum256([]byte(token))}
}

var (
	challenge        = []string{`Bearer realm="mqtarget"`}
	challengeInvalid = []string{`Bearer realm="mqtarget", error="invalid_token"`}
)

// checkToken answers 401 with a Bearer challenge unless the request carries the token (nil when no
// token is configured). guarded runs it before the request slot, so requests without the token take
// none.
func (s *Server) checkToken(w http.ResponseWriter, r *http.Request) error {
	if s.token == nil {
		return nil
	}
	v := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(v, " ")
	if v == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		w.Header()["Www-Authenticate"] = challenge
		return &Error{Status: http.StatusUnauthorized, Field: "http.auth_token_file",
			Msg: "this endpoint needs Authorization: Bearer <token> (http.auth_token_file)"}
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(sum[:], s.token.sum[:]) != 1 {
		w.Header()["Www-Authenticate"] = challengeInvalid
		return &Error{Status: http.StatusUnauthorized, Field: "http.auth_token_file",
			Msg: "wrong bearer token (http.auth_token_file)"}
	}
	return nil
}
