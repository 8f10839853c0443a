package rocketmq

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// Topics come from ?topic= and ?topic2= of any client, and the accepted ones go into protocol frames:
// the fuzz targets check that validation never panics and accepts only names the frames can carry.

func FuzzValidateRocketMQTopic(f *testing.F) {
	for _, s := range publishertest.TopicSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateTopic(name)
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
