package publishers

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Topics come from ?topic= and ?topic2= of any client, and the accepted ones go into protocol frames:
// the fuzz targets check that validation never panics and accepts only names the frames can carry.

var topicSeeds = []string{
	"", "mqtarget", "a", "load-7#ephemeral", "#ephemeral", "a#ephemeral#ephemeral", "a b", "a:b", "a\\b",
	"a\nb", "/queue/x", " x", "x ", "%RETRY%g", "%DLQ%g", "rmq_sys_x", "TBW102", "a|b%c", "ä", "\xff",
	strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("b", 127), strings.Repeat("b", 128),
	strings.Repeat("c", 255), strings.Repeat("c", 256), "x\x7f", "x\x00",
}

func FuzzValidateNSQTopic(f *testing.F) {
	for _, s := range topicSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if (*NSQ)(nil).ValidateTopic(name) != nil {
			return
		}
		// nsqd's rule, written out independently: 1-64 bytes of [.a-zA-Z0-9_-] with an optional
		// "#ephemeral" suffix that counts towards the 64.
		base := strings.TrimSuffix(name, "#ephemeral")
		if len(name) > 64 || base == "" {
			t.Fatalf("accepted %q: length %d", name, len(name))
		}
		if c, ok := onlyAlnumAnd(base, "._-"); !ok {
			t.Fatalf("accepted %q with byte %q", name, c)
		}
	})
}

func FuzzValidateSTOMPTopic(f *testing.F) {
	for _, s := range topicSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if validateSTOMPTopic(name) != nil {
			return
		}
		// The name becomes part of a destination header: it must not end the header line, split it at a
		// ':' or start an escape, and must be text.
		switch {
		case name == "" || len(name) > MaxTopicLen:
			t.Fatalf("accepted %q: length %d", name, len(name))
		case !utf8.ValidString(name):
			t.Fatalf("accepted invalid UTF-8 %q", name)
		case strings.ContainsAny(name, ":\\\r\n\x00"):
			t.Fatalf("accepted %q, which breaks a header", name)
		case strings.HasPrefix(name, "/") || strings.TrimSpace(name) != name:
			t.Fatalf("accepted %q", name)
		}
		if err := checkHeaderText(name); err != nil {
			t.Fatalf("accepted %q, which is no header text: %v", name, err)
		}
	})
}

func FuzzValidateRocketMQTopic(f *testing.F) {
	for _, s := range topicSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidateRocketMQTopic(name) != nil {
			return
		}
		if name == "" || len(name) > 127 {
			t.Fatalf("accepted %q: length %d", name, len(name))
		}
		if c, ok := onlyAlnumAnd(name, "%|_-"); !ok {
			t.Fatalf("accepted %q with byte %q", name, c)
		}
		upper := strings.ToUpper(name)
		if strings.HasPrefix(upper, "RMQ_SYS_") || strings.HasPrefix(name, "%RETRY%") || strings.HasPrefix(name, "%DLQ%") ||
			name == "TBW102" || name == "SCHEDULE_TOPIC_XXXX" || name == "OFFSET_MOVED_EVENT" {
			t.Fatalf("accepted the system topic %q", name)
		}
	})
}

// onlyAlnumAnd reports whether s holds only ASCII letters, digits and bytes of extra; else the first other byte.
func onlyAlnumAnd(s, extra string) (byte, bool) {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return c, false
		}
	}
	return 0, true
}
