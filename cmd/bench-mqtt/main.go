// Command bench-mqtt is the MQTT anchor of docs/benchmarks.md (scripts/bench-mqtt.sh): what a plain Go
// client gets from an MQTT broker without mqtarget in between. -c senders share one paho.golang MQTT 5
// client (paho matches the PUBACKs by packet id, so one connection carries them all, as a Go service
// would share it) and each publishes 100-byte messages to -topic at QoS 1 (-qos), waiting for the
// PUBACK (QoS 2: the PUBCOMP) before the next.
//
// It runs -warmup, then measures for -d and prints closedloop's result line.
//
//	go run ./cmd/bench-mqtt -server 127.0.0.1:1883 -topic anchor -c 16
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqtarget/mqtarget/cmd/internal/closedloop"
)

func main() {
	var c closedloop.Common
	c.Register(flag.CommandLine)
	server := flag.String("server", "127.0.0.1:1883", "MQTT broker host:port")
	topic := flag.String("topic", "mqtarget-anchor", "topic")
	qos := flag.Int("qos", 1, "1 (PUBACK) or 2 (PUBCOMP)")
	flag.Parse()
	switch {
	case *topic == "" || strings.ContainsAny(*topic, "+#"):
		fmt.Fprintf(os.Stderr, "bench-mqtt: -topic: a topic without wildcards, got %q\n", *topic)
		os.Exit(2)
	case *qos != 1 && *qos != 2:
		fmt.Fprintf(os.Stderr, "bench-mqtt: -qos: 1 or 2, got %d\n", *qos)
		os.Exit(2)
	}
	os.Exit(closedloop.Main("bench-mqtt", c, func(c closedloop.Common) (closedloop.Session, error) {
		return open(c, *server, *topic, byte(*qos))
	}, os.Stdout, os.Stderr))
}

func open(c closedloop.Common, server, topic string, qos byte) (closedloop.Session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return closedloop.Session{}, err
	}
	client := paho.NewClient(paho.ClientConfig{Conn: conn, PacketTimeout: c.Timeout})
	// the broker may take as many QoS 1 publishes in flight as there are senders
	inFlight := uint16(min(c.Senders, 65535))
	ca, err := client.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("bench-mqtt-%d", os.Getpid()), KeepAlive: 30, CleanStart: true,
		Properties: &paho.ConnectProperties{ReceiveMaximum: &inFlight}})
	if err != nil {
		_ = conn.Close()
		if ca != nil {
			return closedloop.Session{}, fmt.Errorf("CONNACK reason 0x%02x", ca.ReasonCode)
		}
		return closedloop.Session{}, err
	}
	body := c.Body()
	return closedloop.Session{
		Send: c.Timed(func(ctx context.Context, _ int) error {
			r, err := client.Publish(ctx, &paho.Publish{Topic: topic, QoS: qos, Payload: body})
			if err == nil && r != nil && r.ReasonCode >= 0x80 {
				err = fmt.Errorf("PUBACK reason 0x%02x", r.ReasonCode)
			}
			return err
		}),
		Close: func() {
			_ = client.Disconnect(&paho.Disconnect{ReasonCode: 0})
			select {
			case <-client.Done():
			case <-time.After(c.Timeout):
				fmt.Fprintln(os.Stderr, "bench-mqtt:", errors.New("paho did not stop after DISCONNECT"))
			}
		},
	}, nil
}
