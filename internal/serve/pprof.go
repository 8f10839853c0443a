package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// sideServer is an HTTP server on a listener of its own beside the main one (pprof, the admin routes),
// so what it serves never shares the load-tested listener, its limits or its connections.
type sideServer struct {
	key    string // its configuration key, for errors
	srv    *http.Server
	ln     net.Listener
	served outcome // Serve's
}

// listenSide binds addr; serve starts serving. They are apart so Start can bind every listener before
// any goroutine starts.
func listenSide(key, addr string, h http.Handler, log *slog.Logger) (*sideServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return &sideServer{
		key: key,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln:     ln,
		served: newOutcome(),
	}, nil
}

// listenPprof binds the pprof server. (Importing net/http/pprof also registers on
// http.DefaultServeMux, which mqtarget never serves.)
func listenPprof(addr string, log *slog.Logger) (*sideServer, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also serves the named profiles (heap, goroutine, …)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return listenSide("pprof.addr", addr, mux, log)
}

func (p *sideServer) serve() { go func() { p.served.set(p.srv.Serve(p.ln)) }() }

// shutdown stops the server within ctx, cutting requests still running (a profile being taken) when ctx
// ends, and waits for the serving goroutine. It may be called again, and concurrently, as http.Server's
// Shutdown and Close may: Serve's result is kept for every call.
func (p *sideServer) shutdown(ctx context.Context) error {
	if err := p.srv.Shutdown(ctx); err != nil {
		_ = p.srv.Close()
	}
	// Not bounded by ctx: once Shutdown or Close has closed the listener, Serve returns at once.
	<-p.served.done
	if err := p.served.err; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", p.key, err)
	}
	return nil
}

// outcome is the result of something that ends once (a Serve, a shutdown), for any number of waiters:
// set once, it closes done, after which err may be read.
type outcome struct {
	done chan struct{}
	err  error
}

func newOutcome() outcome { return outcome{done: make(chan struct{})} }

func (o *outcome) set(err error) {
	o.err = err
	close(o.done)
}
