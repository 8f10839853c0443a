package itest

import (
	"fmt"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/testwait"
)

func TestNSQ(t *testing.T) {
	Lane(t, "nsq")
	h := NewNSQProcs(t, NSQDBin(t), 3)
	RunSuite(t, h)
}

// TestEmbeddedNSQ runs the suite against the embedded default: mqtarget with no nsq.hosts.
func TestEmbeddedNSQ(t *testing.T) {
	tg := StartTarget(t, nil, nil)
	tcp, http := embeddedNSQ(tg)
	if len(tcp) != 3 {
		t.Fatalf("embedded nsqd instances: %d, want 3", len(tcp))
	}
	h := &NSQ{TCP: tcp, HTTP: http}
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })
	t.Run("bad input", func(t *testing.T) { RunBadInput(t, h) })
}

// TestNSQRejects checks that a message over nsqd's --max-msg-size answers 413 (refused before it reaches
// nsqd, which would close the shared connection), and that the next request succeeds.
func TestNSQRejects(t *testing.T) {
	Lane(t, "nsq")
	p := StartNSQDProc(t, NSQDBin(t), "-max-msg-size", "1000")
	h := &NSQ{TCP: []string{p.TCPAddr}, HTTP: []string{p.HTTPAddr}}
	tg := StartTarget(t, h, nil)
	topic := uniqueTopic("itreject")
	for i := range 3 {
		if r := tg.Get(t, "/send1?size=2000&topic="+topic); r.Status != 413 || r.Error == "" {
			t.Fatalf("round %d: oversized for nsqd: %d %q, want 413", i, r.Status, r.Error)
		}
		testwait.Until(t, 5*time.Second, "a normal message after a rejected one", func() error {
			if r := tg.Get(t, "/send1?size=1000&topic="+topic); r.Status != 200 {
				return fmt.Errorf("%d %s", r.Status, r.Error)
			}
			return nil
		})
	}
	if n := h.Stored(t, 0, topic); n != 3 {
		t.Errorf("nsqd holds %d messages, want the 3 accepted ones", n)
	}
}

// embeddedNSQ is the embedded nsqd instances' TCP and HTTP addresses (nils when nsqd is external).
func embeddedNSQ(tg *Target) (tcp, http []string) {
	e := tg.App.Embedded("nsq")
	if e == nil {
		return nil, nil
	}
	http, _ = e.Setup["http"].([]string)
	return e.Addrs, http
}
