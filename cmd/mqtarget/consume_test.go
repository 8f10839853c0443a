package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/consume"
	"github.com/mqtarget/mqtarget/internal/itest"
	"github.com/mqtarget/mqtarget/message"
)

func TestConsumeBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{name: "unknown broker", args: []string{"-broker", "pulsar"}, want: "broker: unknown broker"},
		{name: "negative count", args: []string{"-nsq.hosts", "127.0.0.1:1", "-count", "-1"}, want: "-count:"},
		{name: "count not a number", args: []string{"-count", "many"}, want: "-count"},
		{name: "negative duration", args: []string{"-duration=-1s"}, want: "-duration:"},
		{name: "unknown output", args: []string{"-o", "xml"}, want: "-o:"},
		{name: "embedded broker", args: []string{"-broker", "stomp"}, want: "-stomp.hosts:"},
		{name: "bad nsq topic", args: []string{"-nsq.hosts", "127.0.0.1:1", "-topic", "a b"}, want: "topic: \"a b\" is not a valid NSQ topic"}, // config.Load checks it
		{name: "bad nsq channel", args: []string{"-nsq.hosts", "127.0.0.1:1", "-group", "a b"}, want: "-group:"},
		{name: "unknown setting", args: []string{"-nsq.hostz", "x"}, want: "nsq.hostz"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"consume"}, c.args...), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want 2 naming %q", code, stderr.String(), c.want)
			}
		})
	}
}

func TestConsumeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"consume", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "usage: mqtarget consume") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestConsumeUnreachable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"consume", "-nsq.hosts", "127.0.0.1:1", "-count", "1"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "nsq.hosts[0]") {
		t.Fatalf("exit %d, stderr %q; want 1 naming nsq.hosts[0]", code, stderr.String())
	}
}

// TestConsumeNSQ publishes to an in-process nsqd and reads the topic back with the subcommand.
func TestConsumeNSQ(t *testing.T) {
	cfg, pub := itest.EmbeddedNSQ(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 200
	cases := []struct {
		name  string
		count string
		code  int
	}{
		{name: "all of them", count: "200", code: 0},
		{name: "fewer than asked for", count: "201", code: 1}, // -duration ends it
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := "cmdconsume" + c.count
			src := message.NewSource()
			for i := range n {
				if err := pub.Publish(ctx, i%2, topic, src.Build(src.NextID(), 100)); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"consume", "-nsq.hosts", strings.Join(cfg.Hosts, ","), "-topic", topic,
				"-count", c.count, "-duration", "2s", "-o", "json"}, &stdout, &stderr)
			var r consume.Report
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				t.Fatalf("exit %d, stdout %q, stderr %q: %v", code, stdout.String(), stderr.String(), err)
			}
			if code != c.code || r.Count != n || r.Lost != 0 || r.Duplicates != 0 || r.Broker != "nsq" || r.Topic != topic {
				t.Fatalf("exit %d, report %+v; want exit %d with %d messages, nothing lost or duplicated", code, r, c.code, n)
			}
		})
	}
}
