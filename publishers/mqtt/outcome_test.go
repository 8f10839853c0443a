package mqtt

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/publishers"
)

// TestSendOutcome: a publish that failed because its connection went is unavailable, even when the
// connection's end reached the publish's context only (the race a CI run hit: a PUBACK to a QoS 2
// PUBLISH closed the connection, and the publish was reported as a 10 s stall after 0 s); only the
// publish's own deadline on a live connection is a stall.
func TestSendOutcome(t *testing.T) {
	failed := errors.New("paho: connection lost")
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	cases := []struct {
		name         string
		err          error
		closed       bool
		session, ack context.Context
		want         error // nil: success
		stalled      bool
	}{
		{"acknowledged", nil, false, live, live, nil, false},
		{"refused by the broker", publishers.Wrap(publishers.ErrRejected, failed), false, live, live, publishers.ErrRejected, false},
		{"publisher closed", failed, true, ended, ended, publishers.ErrClosed, false},
		{"connection lost, seen on the session", failed, false, ended, ended, publishers.ErrUnavailable, false},
		{"connection lost, reached the publish's context only", failed, false, live, ended, publishers.ErrUnavailable, false},
		{"connection lost, neither context ended yet", failed, false, live, live, publishers.ErrUnavailable, false},
		{"no acknowledgement within maxAckWait", failed, false, live, expired, publishers.ErrTimeout, true},
		{"deadline and connection lost at once", failed, false, ended, expired, publishers.ErrUnavailable, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := sendOutcome(tc.err, tc.closed, tc.session, tc.ack)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("%v, want success", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("%v, want %v", err, tc.want)
			}
			if errors.Is(err, errStalled) != tc.stalled {
				t.Errorf("%v: stalled %v, want %v (the connection is closed for a stall only)", err, !tc.stalled, tc.stalled)
			}
		})
	}
}
