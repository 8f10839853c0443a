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
	served chan error // receives Serve's result once
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
		served: make(chan error, 1),
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

func (p *sideServer) serve() { go func() { p.served <- p.srv.Serve(p.ln) }() }

// shutdown stops the server within ctx, cutting requests still running (a profile being taken) when ctx
// ends, and waits for the serving goroutine.
func (p *sideServer) shutdown(ctx context.Context) error {
	if err := p.srv.Shutdown(ctx); err != nil {
		_ = p.srv.Close()
	}
	if err := <-p.served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", p.key, err)
	}
	return nil
}
