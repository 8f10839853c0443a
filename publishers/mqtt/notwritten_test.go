package mqtt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pahosession "github.com/eclipse/paho.golang/paho/session"
	paho311 "github.com/eclipse/paho.mqtt.golang"

	"github.com/mqtarget/mqtarget/publishers"
)

// endedLink is a connection that ends under its publish: the publish fails with err, and the
// connection's watcher retires it (cancel) as it would once the client noticed the end.
type endedLink struct {
	err    error
	cancel context.CancelFunc
}

func (l endedLink) publish(context.Context, byte, string, []byte) error { l.cancel(); return l.err }
func (l endedLink) subscribe(context.Context, string, byte) (byte, error) {
	return 0, l.err
}
func (l endedLink) done() <-chan struct{} { return closedChan }
func (l endedLink) release()              {}
func (l endedLink) disconnect()           {}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// TestSendOnceResendsOnlyUnwritten: a publish its client refused because the connection had ended
// before it was written (paho.golang's ErrNoConnection, paho.mqtt.golang's ErrNotConnected) goes once
// more on the host's next connection and is acknowledged there, once; one written to the connection
// that then ended is not resent (the broker may hold it): unavailable, and the broker read nothing.
func TestSendOnceResendsOnlyUnwritten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		resent bool
	}{
		{"unwritten, paho.golang", fmt.Errorf("%w: %w", errNotWritten, pahosession.ErrNoConnection), true},
		{"unwritten, paho.mqtt.golang", fmt.Errorf("%w: %w", errNotWritten, paho311.ErrNotConnected), true},
		{"written, then the connection ended", errors.New("connection lost"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, behave)
			c := DefaultConfig()
			c.Servers = []string{f.addr()}
			p, err := New(c, discard())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close() }()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &session{link: endedLink{tc.err, cancel}, ctx: ctx, cancel: cancel, born: time.Now(), maxQoS: 2, slots: make(chan struct{}, 1)}
			err = p.sendOnce(p.hosts[0], s, "t", []byte("x"))
			switch {
			case tc.resent && err != nil:
				t.Fatalf("sendOnce: %v, want success on the next connection", err)
			case !tc.resent && !errors.Is(err, publishers.ErrUnavailable):
				t.Fatalf("sendOnce: %v, want unavailable, not resent", err)
			}
			want := int64(0)
			if tc.resent {
				want = 1
			}
			if n := f.received.Load(); n != want {
				t.Errorf("the broker read %d PUBLISHes, want %d", n, want)
			}
		})
	}
}
