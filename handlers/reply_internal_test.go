package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func TestAppendStringIsJSON(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"plain", "nsq topic-1.x_y"},
		{"quote and backslash", `a"b\c`},
		{"control characters", "nl\n cr\r tab\t nul\x00 us\x1f"},
		{"html stays as is", "<a href='x'>&</a>"},
		{"utf-8", "héllo wörld ✓"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := appendString([]byte("prefix:"), tc.in)
			if string(b[:7]) != "prefix:" {
				t.Fatalf("prefix clobbered: %q", b)
			}
			var got string
			if err := json.Unmarshal(b[7:], &got); err != nil {
				t.Fatalf("%q is not a JSON string: %v", b[7:], err)
			}
			if got != tc.in {
				t.Errorf("decoded %q, want %q", got, tc.in)
			}
		})
	}
}

func TestTopicName(t *testing.T) {
	for _, tc := range []struct {
		base string
		k    int
		want string
	}{
		{"t", 0, "t-0"},
		{"load", 12, "load-12"},
		{"eph#ephemeral", 3, "eph-3#ephemeral"},
		{"a.b_c", 9999, "a.b_c-9999"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := topicName(tc.base, tc.k); got != tc.want {
				t.Errorf("topicName(%q, %d) = %q, want %q", tc.base, tc.k, got, tc.want)
			}
		})
	}
}

// TestParseParams: a well-formed query reads as url.ParseQuery reads it; a malformed one, which
// url.ParseQuery would partly skip, is an error naming the parameter (or "query") and the problem.
func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		field     string // "" for a well-formed query
		mentions  string // in the error message
	}{
		{name: "empty", raw: ""},
		{name: "one", raw: "size=10"},
		{name: "all", raw: "broker=nsq&topic=a&topic2=b&size=3&topics=4&mode=sequential"},
		{name: "empty value", raw: "topic="},
		{name: "no equals sign", raw: "topic"},
		{name: "escapes", raw: "topic=a%2Eb&topic2=c+d"},
		{name: "escaped name", raw: "to%70ic=x"},
		{name: "empty pairs", raw: "&&size=5&"},
		{name: "equals sign in value", raw: "topic=a=b"},

		{"semicolon separator", "topic=a;size=5", "query", "';'"},
		{"semicolon after a good pair", "size=5&topic=a;b", "query", "topic=a;b"},
		{"bad escape in value", "topic=%zz&size=5", "topic", "%zz"},
		{"truncated escape in value", "size=5&topic=a%2", "topic", "%2"},
		{"bad escape in name", "%zz=1&size=5", "query", "%zz"},
		{"empty name", "=5", "query", "empty parameter name"},
		{"duplicated", "topic=a&topic=b", "topic", "more than once"},
		{"duplicated through an escape", "size=1&si%7Ae=2", "size", "more than once"},
		{"duplicated with the same value", "mode=batch&mode=batch", "mode", "more than once"},
		{"unknown", "sise=5", "sise", "unknown parameter"},
		{"unknown after known", "size=5&bogus=1", "bogus", "unknown parameter"},
		{"unknown with bad escape", "bo%zzgus=1", "query", "bo%zzgus"},
		{"first problem wins", "bogus=1&topic=%zz", "bogus", "unknown parameter"},
		{"too many pairs", strings.Repeat("&", maxQueryPairs) + "size=5", "query", "at most 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseParams(tc.raw)
			if tc.field != "" {
				switch {
				case err == nil:
					t.Fatalf("parseParams(%q) = %+v, want an error for %s", tc.raw, got, tc.field)
				case err.Status != 400 || err.Field != tc.field || !strings.Contains(err.Msg, tc.mentions):
					t.Errorf("error %d field %q %q, want 400 field %q mentioning %q", err.Status, err.Field, err.Msg, tc.field, tc.mentions)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseParams(%q): %v", tc.raw, err)
			}
			want, werr := url.ParseQuery(tc.raw)
			if werr != nil {
				t.Fatalf("case is not well-formed: %v", werr)
			}
			for i, name := range paramNames {
				if got.has[i] != want.Has(name) || got.val[i] != want.Get(name) {
					t.Errorf("%s: has=%v val=%q, url.Values has=%v get=%q", name, got.has[i], got.val[i], want.Has(name), want.Get(name))
				}
			}
		})
	}
}

func TestParseParamsLimit(t *testing.T) {
	at := "size=5" + strings.Repeat("&", maxQueryPairs-1)
	if _, err := parseParams(at); err != nil {
		t.Errorf("%d pairs: %v", maxQueryPairs, err)
	}
	if _, err := parseParams(at + "&"); err == nil || err.Field != "query" {
		t.Errorf("%d pairs: %v, want an error for query", maxQueryPairs+1, err)
	}
}

// TestContentLength: every JSON reply carries its Content-Length and is never chunked, whether
// net/http sets the length (bodies within its buffer) or writeJSON does, for GET and HEAD, and with
// "Connection: close" set as boundBody does.
func TestContentLength(t *testing.T) {
	var size atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("close") {
			w.Header()["Connection"] = connectionClose
		}
		writeJSON(w, http.StatusAccepted, bytes.Repeat([]byte("x"), int(size.Load())))
	}))
	defer srv.Close()
	for _, n := range []int{0, 1, 142, netHTTPBuffer - 1, netHTTPBuffer, netHTTPBuffer + 1, 100 << 10} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			for _, q := range []string{"", "?close"} {
				t.Run(fmt.Sprintf("%d %s %s", n, method, q), func(t *testing.T) {
					size.Store(int64(n))
					req, _ := http.NewRequest(method, srv.URL+q, nil)
					resp, err := srv.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					switch {
					case err != nil:
						t.Fatal(err)
					case resp.StatusCode != http.StatusAccepted:
						t.Errorf("status %d", resp.StatusCode)
					case len(resp.TransferEncoding) > 0:
						t.Errorf("Transfer-Encoding %v, want a Content-Length", resp.TransferEncoding)
					case resp.Header.Get("Content-Length") != strconv.Itoa(n) && !(n == 0 && method == http.MethodHead):
						t.Errorf("Content-Length %q, want %d", resp.Header.Get("Content-Length"), n)
					case method == http.MethodGet && len(body) != n:
						t.Errorf("body of %d bytes, want %d", len(body), n)
					case resp.Header.Get("Content-Type") != "application/json":
						t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
					}
				})
			}
		}
	}
}

// FuzzParseParams: parseParams never accepts what url.ParseQuery would read differently: an accepted
// query parses there too, with the same value for every parameter and no parameter twice.
func FuzzParseParams(f *testing.F) {
	for _, seed := range []string{"", "size=10", "topic=a;b", "%zz=1", "topic=a&topic=b", "to%70ic=x&mode=batch", "=", "&&", "topic=%C3%A9+x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := parseParams(raw)
		if err != nil {
			if err.Status != 400 || err.Field == "" || err.Msg == "" {
				t.Fatalf("parseParams(%q): error %+v without status 400, field and message", raw, err)
			}
			return
		}
		want, werr := url.ParseQuery(raw)
		if werr != nil {
			t.Fatalf("parseParams accepted %q, url.ParseQuery: %v", raw, werr)
		}
		for k, vs := range want {
			i := paramIndex(k)
			if i < 0 || len(vs) != 1 || !got.has[i] || got.val[i] != vs[0] {
				t.Fatalf("parseParams(%q) = %+v, url.ParseQuery %q = %q", raw, got, k, vs)
			}
		}
	})
}
