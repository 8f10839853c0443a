package handlers

import (
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// TestBadTopicCutsTheTopic: whichever broker's rules refuse a long topic, the answer quotes at most
// maxEcho bytes of it (its start and end around the note of what was cut) and keeps the rule's own
// words whole, under the 400-byte backstop that would otherwise cut them.
func TestBadTopicCutsTheTopic(t *testing.T) {
	topic := strings.Repeat("7", 2000) + " +#>*\x00"
	for _, name := range brokers.Names() {
		t.Run(name, func(t *testing.T) {
			err := brokers.Lookup(name).ValidateTopic(topic)
			if err == nil {
				t.Fatalf("a topic of %d bytes with wildcards, a space and a NUL passes %s's rules", len(topic), name)
			}
			e := badTopic("topic", topic, "", err)
			if n := strings.Count(e.Msg, "7"); n > maxEcho+20 { // (the rules may name a number or two)
				t.Errorf("the answer quotes %d bytes of the topic, want at most %d: %.300q", n, maxEcho, e.Msg)
			}
			if quoted := strings.Count(err.Error(), "7") > maxEcho; quoted && !strings.Contains(e.Msg, "bytes cut)") || len(e.Msg) > maxErrorMsg {
				t.Errorf("answer of %d bytes, want the topic cut and at most %d: %.300q", len(e.Msg), maxErrorMsg, e.Msg)
			}
			if e.Field != "topic" || e.Status != 400 {
				t.Errorf("field %q status %d, want topic 400", e.Field, e.Status)
			}
		})
	}
}
