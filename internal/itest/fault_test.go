package itest

import (
	"testing"
)

// The fault tests (issue #9): each broker is killed with SIGKILL and restarted, then frozen with SIGSTOP
// and thawed, under load from concurrent clients; see RunFault for what is checked.

// TestNSQFaults runs against an nsqd started with --mem-queue-size=0: every message it acknowledges is
// then written to its disk queue's file before the OK (go-diskqueue writes each message with its own
// write(2), no user-space buffer), so a kill -9 loses none of them; with the default in-memory queue a
// crash loses what is in memory by design.
func TestNSQFaults(t *testing.T) {
	t.Parallel() // an nsqd of its own
	p := StartNSQDProc(t, NSQDBin(t), "-mem-queue-size", "0", "-sync-every", "1")
	h := &NSQ{TCP: []string{p.TCPAddr}, HTTP: []string{p.HTTPAddr}, Procs: []*NSQDProc{p}}
	RunFaults(t, h)
}

// TestArtemisFaults kills and freezes the Artemis of scripts/artemis.sh (persistent messages: the
// receipt follows the journal write).
func TestArtemisFaults(t *testing.T) {
	Lane(t, "artemis")
	addr, login, pass, ctl := RealBroker(t, "artemis", "ARTEMIS")
	h := &STOMP{Addrs: []string{addr}, Login: login, Passcode: pass, Persistent: true, Ctl: []BrokerControl{ctl}}
	RunFaults(t, h)
}

// TestRocketMQFaults kills and freezes broker-a (host 0; single-host endpoints publish to it) while
// broker-b runs on.
func TestRocketMQFaults(t *testing.T) {
	Lane(t, "rocketmq")
	h := NewRocketMQ(t, RocketMQNamesrv(t))
	RunFaults(t, h)
}
