package stomp

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// Topics come from ?topic= and ?topic2= of any client, and the accepted ones go into protocol frames:
// the fuzz targets check that validation never panics and accepts only names the frames can carry.

func FuzzValidateSTOMPTopic(f *testing.F) {
	for _, s := range publishertest.TopicSeeds {
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
