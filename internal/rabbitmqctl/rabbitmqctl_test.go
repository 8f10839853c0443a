package rabbitmqctl

import (
	"maps"
	"testing"
)

func TestParseQueues(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      map[string]int
		bad       bool
	}{
		{name: "none", out: "", want: map[string]int{}},
		{name: "queues", out: "mqt-a\t3\nmqtarget_roundtrip\t0\n", want: map[string]int{"mqt-a": 3, "mqtarget_roundtrip": 0}},
		{name: "a name with spaces", out: "a b\t1\n", want: map[string]int{"a b": 1}},
		{name: "a warning line", out: "Listing queues for vhost / ...\nq\t1\n", bad: true},
		{name: "not a number", out: "q\tx\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseQueues(tc.out)
			if tc.bad {
				if err == nil {
					t.Fatalf("parseQueues(%q) = %v, want an error", tc.out, got)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("parseQueues(%q) = %v, %v; want %v", tc.out, got, err, tc.want)
			}
		})
	}
}
