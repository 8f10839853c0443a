package kafka_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/kafka"
	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// TestTLS: with kafka.tls the connections are TLS (the checked connection over it), verified against
// tls_ca_file; a broker whose certificate is from another CA is unavailable, named at New.
func TestTLS(t *testing.T) {
	cert, ca := pt.SelfSigned(t)
	_, otherCA := pt.SelfSigned(t) // another key: a CA the broker's certificate is not from
	tf := startFakeTLS(t, pt.Honest, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	for _, tc := range []struct {
		name, ca string
		ok       bool
	}{
		{"the broker's CA", ca, true},
		{"another CA", otherCA, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafka.DefaultConfig()
			c.Brokers = tf.Addrs()
			c.Enabled, c.CAFile = true, tc.ca
			p, err := kafka.New(c, pt.Logger(t))
			if !tc.ok {
				if !errors.Is(err, publishers.ErrUnavailable) || !strings.Contains(err.Error(), "kafka.brokers") {
					t.Errorf("New: %v, want ErrUnavailable naming kafka.brokers", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.Publish(ctx, 0, "tls", []byte("over tls")); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if err := p.PublishBatch(ctx, 0, "tls", [][]byte{[]byte("b1"), []byte("b2")}); err != nil {
				t.Fatalf("PublishBatch: %v", err)
			}
			if got := tf.Stored(); got["over tls"] != 1 || got["b1"] != 1 {
				t.Errorf("stored %v", got)
			}
		})
	}
}
