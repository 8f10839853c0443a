package mqtt_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqtarget/mqtarget/publishers/mqtt"
	pt "github.com/mqtarget/mqtarget/publishers/publishertest"
)

// BenchmarkPublish: mqtarget's Publish at QoS 1 against paho.golang's Publish on one connection of its
// own, to one in-process mochi-mqtt server (its allocations count on both sides alike), from
// GOMAXPROCS×4 goroutines each waiting for its PUBACK. Read ns/op and allocs/op side by side in one run.
func BenchmarkPublish(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := mqtt.StartEmbedded(1, mqtt.EmbeddedOptions{MaxMessageSize: 1 << 20}, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	body := make([]byte, 100)
	b.Run("mqtarget", func(b *testing.B) {
		c := mqtt.DefaultConfig()
		c.Servers = e.Addrs()
		p, err := mqtt.New(c, log)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		pt.BenchParallel(b, func(ctx context.Context) error { return p.Publish(ctx, 0, "bench/mqt", body) })
	})
	b.Run("paho", func(b *testing.B) {
		conn, err := net.Dial("tcp", e.Addrs()[0])
		if err != nil {
			b.Fatal(err)
		}
		client := paho.NewClient(paho.ClientConfig{Conn: conn})
		inFlight := uint16(1024)
		if _, err := client.Connect(b.Context(), &paho.Connect{ClientID: "bench-paho", KeepAlive: 30, CleanStart: true,
			Properties: &paho.ConnectProperties{ReceiveMaximum: &inFlight}}); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = client.Disconnect(&paho.Disconnect{}); <-client.Done() }()
		pt.BenchParallel(b, func(ctx context.Context) error {
			r, err := client.Publish(ctx, &paho.Publish{Topic: "bench/paho", QoS: 1, Payload: body})
			if err == nil && r != nil && r.ReasonCode >= 0x80 {
				err = fmt.Errorf("PUBACK reason 0x%02x", r.ReasonCode)
			}
			return err
		})
	})
}
