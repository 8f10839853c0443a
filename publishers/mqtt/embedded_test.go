package mqtt

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

func TestStartEmbeddedBounds(t *testing.T) {
	cases := []struct {
		name string
		n    int
		max  int
		want string
	}{
		{"none", 0, 1 << 20, "mqtt.embedded: must be 1..16"},
		{"17", 17, 1 << 20, "mqtt.embedded: must be 1..16"},
		{"no message size", 1, 0, "maximum message size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := StartEmbedded(tc.n, EmbeddedOptions{MaxMessageSize: tc.max}, discard())
			if err == nil {
				_ = e.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
	e, err := StartEmbedded(2, EmbeddedOptions{MaxMessageSize: 1 << 20}, discard())
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Addrs()) != 2 || e.Addrs()[0] == e.Addrs()[1] || !strings.HasPrefix(e.Addrs()[0], "127.0.0.1:") {
		t.Errorf("Addrs %v: want two distinct 127.0.0.1 ports", e.Addrs())
	}
	if err := e.Close(); err != nil {
		t.Error(err)
	}
	if err := e.Close(); err != nil { // idempotent
		t.Error(err)
	}
}

// TestPingAndVersion: Ping passes against a server and fails unavailable against one that refuses the
// CONNECT; the version comes from the server's $SYS.
func TestPingAndVersion(t *testing.T) {
	e := embeddedFor(t, 1)
	f := newFake(t, refuseConnect)
	c := DefaultConfig()
	c.Servers = []string{e.Addrs()[0], f.addr()}
	p, err := New(c, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Ping(ctx, 0); err != nil {
		t.Errorf("Ping(0): %v", err)
	}
	if err := p.Ping(ctx, 1); !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "reason 0x87 (Not authorized)") {
		t.Errorf("Ping(1): %v, want ErrUnavailable naming CONNACK's reason 0x87", err)
	}
	if err := p.Ping(ctx, 2); err == nil {
		t.Error("Ping(2): nil for a host out of range")
	}
	if err := p.Publish(ctx, 0, "v", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for p.BrokerVersion(0) == "" && ctx.Err() == nil {
		<-time.After(10 * time.Millisecond)
	}
	if v := p.BrokerVersion(0); v == "" {
		t.Error("BrokerVersion(0) empty: $SYS/broker/version never came")
	} else {
		t.Logf("BrokerVersion(0) = %q", v)
	}
	if v := p.BrokerVersion(1); v != "" {
		t.Errorf("BrokerVersion(1) = %q from a broker never connected", v)
	}
}
