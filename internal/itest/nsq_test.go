package itest

import (
	"os"
	"testing"
)

// nsqdBin returns the nsqd binary scripts/test.sh built; with MQTARGET_INTEGRATION set it must exist.
func nsqdBin(t *testing.T) string {
	Integration(t)
	bin := os.Getenv("MQTARGET_NSQD_BIN")
	if bin == "" {
		t.Fatal("MQTARGET_NSQD_BIN is not set (scripts/test.sh builds nsqd and sets it)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MQTARGET_NSQD_BIN: %v", err)
	}
	return bin
}

func TestNSQ(t *testing.T) {
	h := NewNSQProcs(t, nsqdBin(t), 3)
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })
	t.Run("bad input", func(t *testing.T) { RunBadInput(t, h) })
	t.Run("shutdown drains async", func(t *testing.T) { RunShutdownDrains(t, h) })
	t.Run("broker down", func(t *testing.T) { RunBrokerDown(t, h) })
}

// TestEmbeddedNSQ runs the suite against the embedded default: mqtarget with no nsq.hosts.
func TestEmbeddedNSQ(t *testing.T) {
	tg := StartTarget(t, nil, nil)
	tcp, http := tg.App.EmbeddedNSQ()
	if len(tcp) != 3 {
		t.Fatalf("embedded nsqd instances: %d, want 3", len(tcp))
	}
	h := &NSQ{TCP: tcp, HTTP: http}
	t.Run("delivery", func(t *testing.T) { RunDelivery(t, h) })
	t.Run("bad input", func(t *testing.T) { RunBadInput(t, h) })
}
