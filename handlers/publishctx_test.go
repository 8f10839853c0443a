package handlers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/handlers"
)

// gatedBody is a request body that sends its bytes only once open is closed, as a slow upload does.
type gatedBody struct {
	open    chan struct{}
	reading atomic.Bool
	r       io.Reader
}

func (b *gatedBody) Read(p []byte) (int, error) {
	b.reading.Store(true)
	<-b.open
	return b.r.Read(p)
}

// TestPublishDeadlineStart: a publish's deadline is publish_timeout after the request began (the
// instrumentation's clock read), but after a request body only from when the body was read: a slow
// upload must not eat into publish_timeout.
func TestPublishDeadlineStart(t *testing.T) {
	const timeout = 2 * time.Second
	slack := max(time.Millisecond, timeout/1000)
	f := newFake(1)
	ts := newServer(t, f, func(o *handlers.Options) { o.PublishTimeout = timeout })

	before := time.Now()
	if w := ts.do(http.MethodGet, "/send1", ""); w.Code != http.StatusOK {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
	after := time.Now()
	if dl := f.syncDeadlines[0]; dl.Before(before.Add(timeout)) || dl.After(after.Add(timeout+slack)) {
		t.Errorf("GET: deadline %v after the request's start, want %v..%v", dl.Sub(before), timeout, after.Sub(before)+timeout+slack)
	}

	body := &gatedBody{open: make(chan struct{}), r: strings.NewReader("payload")}
	done := make(chan int)
	go func() {
		r := httptest.NewRequest(http.MethodPost, "/send1", body)
		w := httptest.NewRecorder()
		ts.srv.ServeHTTP(w, r)
		done <- w.Code
	}()
	waitFor(t, "the handler reading the body", body.reading.Load)
	time.Sleep(20 * time.Millisecond) // the upload's duration, longer than the deadlines' slack; not synchronisation
	sent := time.Now()
	close(body.open)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("POST: %d", code)
	}
	if dl := f.syncDeadlines[1]; dl.Before(sent.Add(timeout)) {
		t.Errorf("POST: deadline %v after the body was sent, want at least %v", dl.Sub(sent), timeout)
	}
}
