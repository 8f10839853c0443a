package itest

import (
	"testing"
)

// The MQTT tests run against mosquitto brokers of scripts/mosquitto.sh that each test starts on ports
// of its own (MQTARGET_INTEGRATION=1; scripts/test.sh installs mosquitto and mosquitto-clients).

// TestMQTT: two brokers, two hosts: every endpoint's ledger against mosquitto_sub, bad input, the
// async drain, a stopped and a frozen broker, and /send3Host with two.
func TestMQTT(t *testing.T) {
	Integration(t)
	h := NewMQTT(t, 2)
	RunSuite(t, h)
	t.Run("send3Host with 2 servers", func(t *testing.T) { RunTooFewHosts(t, h, "mqtt.servers") })
}

// TestMQTTFaults kills and freezes one broker under load at QoS 1.
func TestMQTTFaults(t *testing.T) {
	Integration(t)
	RunFaults(t, NewMQTT(t, 1))
}
