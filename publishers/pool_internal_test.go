package publishers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// blockingLink is a connection whose Close blocks until released.
type blockingLink struct {
	started, release chan struct{}
	closed           atomic.Bool
}

func (l *blockingLink) Dead() bool { return false }
func (l *blockingLink) Close() {
	close(l.started)
	<-l.release
	l.closed.Store(true)
}

// A second Close racing the first returns only once the first has closed every connection: callers
// (the suite, an app shutting down) rely on everything being closed when their Close returns.
func TestPoolConcurrentClose(t *testing.T) {
	l := &blockingLink{started: make(chan struct{}), release: make(chan struct{})}
	p := NewPool("test", []string{"a:1"}, 1, func(context.Context, string) (*blockingLink, error) { return l, nil })
	if _, err := p.Get(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() { p.Close(); close(first) }()
	<-l.started
	second := make(chan bool, 1)
	go func() { p.Close(); second <- l.closed.Load() }()
	select {
	case closed := <-second:
		if !closed {
			t.Fatal("second Close returned while the first was still closing the connection")
		}
	case <-time.After(100 * time.Millisecond): // still waiting, as it should: let the first finish
	}
	close(l.release)
	if !<-second {
		t.Error("second Close returned before the connection was closed")
	}
	<-first
	if _, err := p.Get(context.Background(), 0); err != ErrClosed {
		t.Errorf("get after close: %v, want ErrClosed", err)
	}
}
