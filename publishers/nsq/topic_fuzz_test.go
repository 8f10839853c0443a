package nsq

import (
	"testing"

	"github.com/nsqio/go-nsq"

	"github.com/mqtarget/mqtarget/publishers/publishertest"
)

// Topics come from ?topic= and ?topic2= of any client, and the accepted ones go into protocol frames:
// the fuzz targets check that validation never panics and accepts only names the frames can carry.

func FuzzValidateNSQTopic(f *testing.F) {
	for _, s := range publishertest.TopicSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		// The table lookup must agree with go-nsq's regexp, nsqd's own rule, both ways.
		if got, want := (*Publisher)(nil).ValidateTopic(name) == nil, nsq.IsValidTopicName(name); got != want {
			t.Fatalf("ValidateTopic(%q) accepts: %v, go-nsq: %v", name, got, want)
		}
	})
}
