package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestRoundTripCommand runs a small batch through embedded brokers in-process: exit 0 with the row's
// fields, every message back exactly once.
func TestRoundTripCommand(t *testing.T) {
	for _, broker := range []string{"nsq", "stomp"} {
		t.Run(broker, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"roundtrip", "-broker", broker, "-count", "200", "-size", "256", "-handoff", "direct",
				"-echo=true", "-o", "json", "-log.level", "error"}, &out, &errOut)
			if code != 0 {
				t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
			}
			if strings.Contains(errOut.String(), "\r") {
				t.Errorf("a progress line on a stderr that is no terminal: %q", errOut.String())
			}
			var r map[string]any
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			for _, k := range []string{"broker", "count", "size", "send_ms", "echo_receive_ms", "echo_last_latency_ms", "echo_max_latency_ms", "return_receive_ms",
				"return_last_latency_ms", "rtt_p50_ms", "rtt_p99_ms", "rtt_max_ms", "lost", "duplicates"} {
				if _, ok := r[k]; !ok {
					t.Errorf("no %q in %s", k, out.String())
				}
			}
			if r["broker"] != broker || r["count"] != 200.0 || r["lost"] != 0.0 || r["duplicates"] != 0.0 {
				t.Errorf("row %s", out.String())
			}
		})
	}
}

// TestRoundTripCommandNoEcho: with -echo=false and no echo anywhere, the batch does not start: exit 1
// after -probe_wait, naming the host whose probe never came back, and no row.
func TestRoundTripCommandNoEcho(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"roundtrip", "-broker", "stomp", "-count", "10", "-echo=false", "-probe_wait", "300ms", "-log.level", "error"}, &out, &errOut)
	if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "round trip not live: host 0 (") {
		t.Errorf("exit %d, stdout %q, stderr %q: want 1 naming host 0 and no row", code, out.String(), errOut.String())
	}
}

func TestRoundTripCommandBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		flag string
	}{
		{"count 0", []string{"-count", "0"}, "-count"},
		{"count negative", []string{"-count", "-5"}, "-count"},
		{"count too large", []string{"-count", "1000001"}, "-count"},
		{"count not a number", []string{"-count", "many"}, "-count"},
		{"size below the header", []string{"-size", "10"}, "-size"},
		{"size above max", []string{"-size", "2000000"}, "-size"},
		{"size not a number", []string{"-size", "1k"}, "-size"},
		{"producers", []string{"-producers", "0"}, "-producers"},
		{"producers too many", []string{"-producers", "1025"}, "-producers"},
		{"handoff", []string{"-handoff", "pool"}, "-handoff"},
		{"handoff empty", []string{"-handoff", ""}, "-handoff"},
		{"workers", []string{"-workers", "0"}, "-workers"},
		{"workers too many", []string{"-workers", "4097"}, "-workers"},
		{"wait", []string{"-wait", "0s"}, "-wait"},
		{"wait too long", []string{"-wait", "1000h"}, "-wait: must be > 0 and <= 1h0m0s"},
		{"probe wait", []string{"-probe_wait", "0s"}, "-probe_wait"},
		{"probe wait too long", []string{"-probe_wait", "2h"}, "-probe_wait: must be > 0 and <= 1h0m0s"},
		{"batch too large", []string{"-count", "1000000", "-size", "65536", "-message.max_size", "67108864"}, "-count × -size: at most 4294967296 bytes"},
		{"format", []string{"-o", "xml"}, "-o"},
		{"broker", []string{"-broker", "pulsar"}, "broker"},
		{"rocketmq without name servers", []string{"-broker", "rocketmq"}, "rocketmq.name_servers"},
		// STOMP, since nsqd v1.3.0's Exit right after its Main races (under -race) with Main's start.
		{"topic", []string{"-broker", "stomp", "-echo.topics", "/queue/a"}, "echo.topics[0]: \"/queue/a\" starts with '/'"}, // config.Load checks them
		{"ack topic", []string{"-broker", "stomp", "-echo.ack_suffix", " "}, "echo.topics[0] + echo.ack_suffix: \"mqtarget_roundtrip \" starts or ends with whitespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(append([]string{"roundtrip"}, c.args...), &out, &errOut); code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, errOut.String())
			}
			if !strings.Contains(errOut.String(), c.flag) {
				t.Errorf("message %q does not name %s", errOut.String(), c.flag)
			}
		})
	}
}
