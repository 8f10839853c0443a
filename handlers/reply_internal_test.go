package handlers

import (
	"encoding/json"
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
