package closedloop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
)

// Serve is the anchors' floor row (docs/benchmarks.md): the direct client's own session behind the
// HTTP stack mqtarget uses (chi on net/http) and nothing else — no metrics, no ids, no validation, a
// two-byte reply. GET /send1 sends one message with a free sender (there are as many as wrk has
// connections) and answers 200 "ok", or 503 with the error; GET /healthz answers 200 "ok". So /send1 of
// mqtarget against this /send1, side by side, is what mqtarget adds over the same libraries. It serves
// on addr, which must be a loopback address, until ctx ends.
func Serve(ctx context.Context, addr string, senders int, send func(int) error) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-http: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-http: %q: a loopback address only (e.g. 127.0.0.1:23999)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-http: %w", err)
	}
	return serveOn(ctx, ln, senders, send)
}

func serveOn(ctx context.Context, ln net.Listener, senders int, send func(int) error) error {
	free := make(chan int, senders)
	for i := range senders {
		free <- i
	}
	ok := []byte("ok")
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(ok) })
	r.Get("/send1", func(w http.ResponseWriter, req *http.Request) {
		var i int
		select {
		case i = <-free:
		case <-req.Context().Done():
			return
		}
		err := send(i)
		free <- i
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(ok)
	})
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = srv.Shutdown(sctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
