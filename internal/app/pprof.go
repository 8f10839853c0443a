package app

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

// profiler serves net/http/pprof on a listener of its own, so profiling never shares the load-tested
// mux, its routes or its metrics. (Importing net/http/pprof also registers on http.DefaultServeMux,
// which mqtarget never serves.)
type profiler struct {
	srv    *http.Server
	ln     net.Listener
	served chan error // receives Serve's result once
}

// listenPprof binds addr; serve starts serving. They are apart so Start can bind every listener before
// any goroutine starts.
func listenPprof(addr string, log *slog.Logger) (*profiler, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof.addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also serves the named profiles (heap, goroutine, …)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &profiler{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln:     ln,
		served: make(chan error, 1),
	}, nil
}

func (p *profiler) serve() { go func() { p.served <- p.srv.Serve(p.ln) }() }

// shutdown stops the server within ctx, cutting a profile still being taken when ctx ends, and waits
// for the serving goroutine.
func (p *profiler) shutdown(ctx context.Context) error {
	if err := p.srv.Shutdown(ctx); err != nil {
		_ = p.srv.Close()
	}
	if err := <-p.served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("pprof server: %w", err)
	}
	return nil
}
