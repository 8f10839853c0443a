package handlers

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// TestParseParamsMatchesURLQuery pins parseParams to what r.URL.Query() gave the send endpoints before:
// the same first values, the same presence, and an unknown parameter reported iff the query has one.
func TestParseParamsMatchesURLQuery(t *testing.T) {
	for _, tc := range []struct{ name, raw string }{
		{"empty", ""},
		{"one", "size=10"},
		{"all", "broker=nsq&topic=a&topic2=b&size=3&topics=4&mode=sequential"},
		{"first value wins", "topic=a&topic=b"},
		{"empty value", "topic="},
		{"no equals sign", "topic"},
		{"escapes", "topic=a%2Eb&topic2=c+d"},
		{"escaped key", "to%70ic=x"},
		{"bad escape skipped", "topic=%zz&size=5"},
		{"bad escape in key skipped", "%zz=1&size=5"},
		{"semicolon pair skipped", "topic=a;b&size=5"},
		{"empty pairs", "&&size=5&"},
		{"unknown", "sise=5"},
		{"unknown after known", "size=5&bogus=1"},
		{"unknown with bad escape is skipped", "bo%zzgus=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := url.ParseQuery(tc.raw)
			got, unknown, found := parseParams(tc.raw)
			for i, name := range paramNames {
				if got.has[i] != want.Has(name) || got.val[i] != want.Get(name) {
					t.Errorf("%s: has=%v val=%q, url.Values has=%v get=%q", name, got.has[i], got.val[i], want.Has(name), want.Get(name))
				}
			}
			var unknowns []string
			for k := range want {
				if paramIndex(k) < 0 {
					unknowns = append(unknowns, k)
				}
			}
			if found != (len(unknowns) > 0) || (found && !slices.Contains(unknowns, unknown)) {
				t.Errorf("unknown = %q (found %v), url.Values unknown keys %v", unknown, found, unknowns)
			}
		})
	}
}

func TestParseParamsLimit(t *testing.T) {
	under := "size=5" + strings.Repeat("&topic=a", maxQueryPairs-1)
	for _, tc := range []struct {
		name, raw string
	}{
		{"at the limit", under},
		{"over the limit", under + "&topic=a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := url.ParseQuery(tc.raw)
			if p, _, _ := parseParams(tc.raw); p.has[pSize] != want.Has("size") {
				t.Errorf("size read = %v, url.ParseQuery has it = %v", p.has[pSize], want.Has("size"))
			}
		})
	}
}

func TestContentLength(t *testing.T) {
	for _, n := range []int{0, 9, 142, 142, len(contentLengths) - 1, len(contentLengths), 1 << 20} {
		if got := contentLength(n); len(got) != 1 || got[0] != strconv.Itoa(n) {
			t.Errorf("contentLength(%d) = %q", n, got)
		}
	}
}
