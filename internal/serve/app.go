// Package serve wires configuration, brokers, publishers and the HTTP server together, and owns their
// lifecycle: start, serve, and an ordered shutdown.
package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.yaml.in/yaml/v3"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/internal/version"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// App is a running mqtarget.
type App struct {
	cfg     config.Config
	log     *slog.Logger
	raw     []publishers.Publisher // un-instrumented, for Close
	closers []func() error         // embedded brokers, closed after the publishers
	// stoppers end the echoes and round-trip consumers, last first, before the publishers close.
	stoppers []func() error
	addrs    map[*publishers.Broker][]string // where each started broker's publisher connects

	embedded map[string]*publishers.Embedded // by broker name: the brokers running in-process
	handlers *handlers.Server
	http     *http.Server
	ln       net.Listener
	drainLn  *drainListener // the TCP listener under ln's limit and TLS layers
	limit    *limitListener // with http.max_connections 0 it only tracks the connections
	served   outcome        // Serve's: Run, the lame-duck phase and Shutdown wait for it
	admin    *sideServer    // nil unless http.admin_addr is set
	pprof    *sideServer    // nil unless pprof.addr is set
	// greet pings every broker host once at start, so what each runs is known (GET /, mqtarget load)
	// before the first request; closeBrokers cancels and waits for it.
	greet       sync.WaitGroup
	greetCancel context.CancelFunc
	// The first Shutdown call sets shutdownBegun and does the work; every call returns shutdownEnd's.
	shutdownBegun atomic.Bool
	shutdownEnd   outcome
}

// Start starts the brokers' publishers in registry order (with embedded brokers where the configuration
// gives no addresses), the HTTP server and, when they are set, the admin and pprof servers.
func Start(cfg config.Config, log *slog.Logger) (_ *App, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Read before any broker starts, so a bad token file costs nothing.
	token, err := cfg.HTTP.AuthToken(os.ReadFile)
	if err != nil {
		return nil, err
	}
	serverTLS, err := cfg.HTTP.ServerTLS()
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log, served: newOutcome(), shutdownEnd: newOutcome(), addrs: map[*publishers.Broker][]string{}}
	defer func() {
		if err != nil {
			if a.ln != nil {
				_ = a.ln.Close()
			}
			if a.admin != nil {
				_ = a.admin.ln.Close()
			}
			a.closeBrokers()
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg, version.Get())
	metrics := publishers.NewMetrics(reg, log)

	pubs := map[string]publishers.Publisher{}
	setup := map[string]any{}
	for _, b := range brokers.List {
		pub, info, err := a.startBroker(b, cfg, log.With("broker", b.Name))
		if err != nil {
			return nil, err
		}
		if pub == nil {
			continue // not enabled by this configuration
		}
		a.raw = append(a.raw, pub)
		pubs[b.Name] = metrics.Instrument(b.Name, pub)
		setup[b.Name] = info
	}
	if pubs[cfg.Broker] == nil { // Validate refuses such a configuration; this guards the wiring
		return nil, fmt.Errorf("broker: %q is not enabled by this configuration", cfg.Broker)
	}

	// Topics are validated by the broker that will get them, so the rules stay with the broker.
	def := pubs[cfg.Broker]
	if err := def.ValidateTopic(cfg.Topic); err != nil {
		return nil, fmt.Errorf("topic: %w", err)
	}
	if err := def.ValidateTopic(cfg.Topic2); err != nil {
		return nil, fmt.Errorf("topic2: %w", err)
	}

	roundTrips, err := a.startRoundTrips(cfg, pubs, reg, log)
	if err != nil {
		return nil, err
	}

	a.handlers = handlers.New(handlers.Options{
		Publishers:        pubs,
		RoundTrips:        roundTrips,
		RoundTripTopic:    cfg.Echo.DefaultTopic(),
		DefaultBroker:     cfg.Broker,
		Topic:             cfg.Topic,
		Topic2:            cfg.Topic2,
		MessageSize:       cfg.Message.Size,
		MaxMessageSize:    cfg.Message.MaxSize,
		PublishTimeout:    cfg.PublishTimeout,
		AsyncLimit:        cfg.Async.MaxInFlight,
		AsyncMaxBytes:     cfg.Async.MaxInFlightBytes,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		MaxRequests:       cfg.HTTP.MaxRequests,
		AuthToken:         token,
		AdminSeparate:     cfg.HTTP.AdminAddr != "",
		MaxDistinctTopics: cfg.Topics.MaxDistinct,
		ReadyBrokers:      cfg.ReadyBrokers(),
		ReadyTimeout:      cfg.Readyz.Timeout,
		Registry:          reg,
		Log:               log,
		Setup:             setup,
		Config:            redactedConfig(cfg),
	})
	a.greetBrokers(cfg.Readyz.Timeout)
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return nil, fmt.Errorf("http.addr: %w", err)
	}
	a.drainLn = newDrainListener(ln.(*net.TCPListener))
	a.ln = a.drainLn
	a.limit = newLimitListener(a.ln, cfg.HTTP.MaxConnections)
	a.ln = a.limit
	if serverTLS != nil {
		// net/http handshakes within ReadHeaderTimeout and answers plain HTTP with 400.
		a.ln = tls.NewListener(a.ln, serverTLS)
	}
	if cfg.HTTP.AdminAddr != "" {
		if a.admin, err = listenSide("http.admin_addr", cfg.HTTP.AdminAddr, a.handlers.AdminHandler(), log); err != nil {
			return nil, err
		}
		// The admin routes are bounded like the main ones: a scraper that never reads must not hold them.
		a.admin.srv.ReadHeaderTimeout = cfg.HTTP.ReadHeaderTimeout
		a.admin.srv.WriteTimeout = cfg.HTTP.WriteTimeout
		a.admin.srv.IdleTimeout = cfg.HTTP.IdleTimeout
		a.admin.srv.MaxHeaderBytes = cfg.HTTP.MaxHeaderBytes
		if serverTLS != nil {
			a.admin.ln = tls.NewListener(a.admin.ln, serverTLS)
		}
	}
	if cfg.PProf.Addr != "" {
		if a.pprof, err = listenPprof(cfg.PProf.Addr, log); err != nil {
			return nil, err
		}
		a.pprof.serve()
		log.Info("pprof listening", "addr", a.pprof.ln.Addr().String())
	}
	if a.admin != nil {
		a.admin.serve()
		log.Info("admin routes listening", "addr", a.admin.ln.Addr().String(), "routes", "/healthz /readyz /metrics")
	}
	// No ReadTimeout: the handlers bound the body themselves (handlers.Options.ReadTimeout says why).
	// WriteTimeout starts at the end of the request headers and includes the handler's wait for the
	// broker (the handlers restart it at the end of a body): it frees the connection, the goroutine and
	// the answer of a client that does not read, which idle_timeout does not while a write blocks.
	a.http = &http.Server{
		Handler:           a.handlers,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    cfg.HTTP.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	a.http.ConnState = a.limit.connState
	go func() { a.served.set(a.http.Serve(a.ln)) }()
	log.Info("mqtarget listening", "addr", a.ln.Addr().String(), "default_broker", cfg.Broker, "brokers", setup)
	return a, nil
}

// redactedConfig is cfg as /config shows it: its YAML form (which prints secrets as "<redacted>") read
// back as plain values, so the JSON encoder cannot meet a secret's raw string.
func redactedConfig(cfg config.Config) any {
	y, err := cfg.YAML()
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var m map[string]any
	if err := yaml.Unmarshal(y, &m); err != nil {
		return map[string]any{"error": err.Error()}
	}
	return m
}

// registerBuildInfo adds mqtarget_build_info, the usual constant 1 whose labels say which build runs.
func registerBuildInfo(reg prometheus.Registerer, v version.Info) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "mqtarget_build_info",
		Help: "Always 1; the labels identify the running build.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	reg.MustRegister(g)
}

// Addr is the address the HTTP server listens on.
func (a *App) Addr() string { return a.ln.Addr().String() }

// AdminAddr is the address /healthz, /readyz and /metrics are served on: http.admin_addr's listener, or
// the HTTP server's when it is not set.
func (a *App) AdminAddr() string {
	if a.admin == nil {
		return a.Addr()
	}
	return a.admin.ln.Addr().String()
}

// PprofAddr is the address net/http/pprof is served on, or "" when pprof.addr is not set.
func (a *App) PprofAddr() string {
	if a.pprof == nil {
		return ""
	}
	return a.pprof.ln.Addr().String()
}

// Run serves until ctx ends (a signal), then, after the lame-duck phase, shuts down within the
// configured grace period.
func (a *App) Run(ctx context.Context) error {
	var serveErr error
	select {
	case <-ctx.Done():
		a.lameDuck()
	case <-a.served.done:
		serveErr = a.served.err
	}
	grace, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownGrace)
	defer cancel()
	return errors.Join(serveErr, a.Shutdown(grace))
}

// lameDuck serves for shutdown_lame_duck more with /readyz answering 503 and every answer closing its
// connection. http.Server.Shutdown closes the connections it finds idle, and a client that sent a request
// on one at that moment gets a reset instead of an answer; after this phase the connections of clients
// that kept sending are closed by their last answer instead, and load balancers have seen /readyz fail.
func (a *App) lameDuck() {
	d := a.cfg.ShutdownLameDuck
	if d <= 0 {
		return
	}
	a.log.Info("lame duck: /readyz answers 503, answers close their connections", "for", d)
	a.handlers.EnterLameDuck()
	// A fixed wait is the point here: it is the time clients get to notice.
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.served.done: // the server failed meanwhile; nothing left to wait for
	}
}

// Shutdown stops accepting connections, lets in-flight requests finish, waits for async publishes,
// then closes the publishers, the embedded brokers, the admin server and the pprof server; all within ctx.
// The admin server stops after the brokers, so /readyz (503 since the lame-duck phase) and /metrics
// can be read until the end.
//
// Shutdown may be called again, and concurrently (Run calls it too): the first call shuts down within
// its ctx; the others wait for it within theirs and return its result, or their ctx's error if it ends
// first (which does not cut the first call's shutdown short).
func (a *App) Shutdown(ctx context.Context) error {
	if a.shutdownBegun.CompareAndSwap(false, true) {
		a.shutdownEnd.set(a.shutdown(ctx))
		return a.shutdownEnd.err
	}
	select {
	case <-a.shutdownEnd.done:
		return a.shutdownEnd.err
	case <-ctx.Done():
	}
	select { // both ended: the result is worth more than the ctx's error
	case <-a.shutdownEnd.done:
		return a.shutdownEnd.err
	default:
		return ctx.Err()
	}
}

// shutdown is Shutdown's work, done once.
func (a *App) shutdown(ctx context.Context) error {
	start := time.Now()
	a.drain(ctx)
	a.log.Info("shutting down: no new connections, finishing in-flight requests")
	httpErr := a.http.Shutdown(ctx)
	if httpErr != nil {
		// Grace is over: cut the remaining connections so nothing outlives the shutdown.
		_ = a.http.Close()
	}
	<-a.served.done // at once: Shutdown or Close has closed the listener
	if err := a.served.err; !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, errDrained) {
		httpErr = errors.Join(httpErr, err)
	}
	st := a.handlers.DrainAsync(ctx)
	a.log.Info("async publishes drained", "accepted", st.Accepted, "acked", st.Acked, "failed", st.Failed,
		"abandoned", st.Abandoned, "rejected_429", st.Rejected)
	a.closeBrokers()
	// pprof goes last, so a slow shutdown can still be profiled.
	for _, side := range []*sideServer{a.admin, a.pprof} {
		if side == nil {
			continue
		}
		if err := side.shutdown(ctx); err != nil {
			httpErr = errors.Join(httpErr, err)
		}
	}
	a.log.Info("shutdown complete", "took", time.Since(start).Round(time.Millisecond))
	if st.Abandoned > 0 {
		httpErr = errors.Join(httpErr, fmt.Errorf("%d async publishes abandoned after the grace period", st.Abandoned))
	}
	return httpErr
}

// drain closes the HTTP listener without resetting the connections in its backlog (drainListener):
// every answer closes its connection (as in the lame-duck phase) and new requests are held before their
// handlers, so clients that reconnect at once (wrk, hey, vegeta do) wait for an answer instead of
// queueing again; once the backlog has stayed empty for drainQuiet (at most drainMax, within ctx) the
// listener is closed and the held requests go on. Their clients then find the port closed: a refused
// connection, before any request is sent.
//
// Then it waits (at most drainMax more, within ctx) until every connection has a request being served:
// once http.Server.Shutdown has begun, net/http closes a connection unanswered when a request arrives on
// it. That hits the keep-alive connections idle since before the drain (a load generator descheduled
// between an answer and its next request: a busy CI run lost 23 of 135 requests that way), and the
// connections accepted during the drain whose request net/http had not read yet (a busy CI run lost
// 12 of 334 so). Held and answered with Connection: close instead, those requests get answers; a
// connection nobody sends on costs the shutdown at most drainMax. The limit listener tracks the
// connections, with or without http.max_connections.
func (a *App) drain(ctx context.Context) {
	a.handlers.EnterLameDuck()
	release := a.handlers.Hold()
	defer release()
	drained := a.drainLn.Drain(drainQuiet, drainMax)
	// Bounded even where Accept is not called: past http.max_connections the limit listener waits
	// for a slot before it accepts.
	t := time.NewTimer(drainMax + drainQuiet)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	case <-ctx.Done():
	}
	_ = a.drainLn.Close()
	end := time.NewTimer(drainMax)
	defer end.Stop()
	tick := time.NewTicker(5 * time.Millisecond) // polling interval
	defer tick.Stop()
	for a.limit.unread() > 0 {
		select {
		case <-tick.C:
		case <-end.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// closeBrokers stops the echoes and round-trip consumers, then closes publishers, then embedded
// brokers; all are idempotent.
func (a *App) closeBrokers() {
	if a.greetCancel != nil {
		a.greetCancel()
	}
	a.greet.Wait()
	for i := len(a.stoppers) - 1; i >= 0; i-- {
		_ = a.stoppers[i]()
	}
	a.stoppers = nil
	for _, p := range a.raw {
		_ = p.Close()
	}
	for _, c := range a.closers {
		if err := c(); err != nil {
			a.log.Warn("closing embedded broker", "err", err)
		}
	}
}

// greetBrokers pings every host of the publishers that learn their brokers' versions from the
// handshake, all at once in the background within timeout; a host that does not answer stays unknown
// until a request connects to it.
func (a *App) greetBrokers(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	a.greetCancel = cancel
	for _, p := range a.raw {
		if _, ok := p.(publishers.BrokerVersioner); !ok {
			continue
		}
		for h := range p.Hosts() {
			a.greet.Go(func() { _ = p.Ping(ctx, h) })
		}
	}
}
