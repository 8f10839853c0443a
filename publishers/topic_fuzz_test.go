package publishers

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nsqio/go-nsq"
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
		// The table lookup must agree with go-nsq's regexp, nsqd's own rule, both ways.
		if got, want := (*NSQ)(nil).ValidateTopic(name) == nil, nsq.IsValidTopicName(name); got != want {
			t.Fatalf("ValidateTopic(%q) accepts: %v, go-nsq: %v", name, got, want)
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
		err := ValidateRocketMQTopic(name)
		if want := rmqNameRegexp.MatchString(name) && len(name) <= 127; !want {
			if err == nil {
				t.Fatalf("accepted %q, which RocketMQ's rule (%v) refuses", name, rmqNameRegexp)
			}
			return
		}
		if err != nil && !strings.Contains(err.Error(), "system topic") {
			t.Fatalf("refused %q, which RocketMQ's rule (%v) allows: %v", name, rmqNameRegexp, err)
		}
		if err != nil {
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

// rmqNameRegexp is RocketMQ's name rule as its TopicValidator writes it; rmqName must agree with it.
var rmqNameRegexp = regexp.MustCompile(`^[%|a-zA-Z0-9_-]+$`)

// onlyAlnumAnd reports whether s holds only ASCII letters, digits and bytes of extra; else the first other byte.
func onlyAlnumAnd(s, extra string) (byte, bool) {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return c, false
		}
	}
	return 0, true
}
