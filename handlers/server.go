// Package handlers serves mqtarget's HTTP endpoints: the send endpoints that publish through a
// publishers.Publisher, health and readiness, metrics and an index.
package handlers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqtarget/mqtarget/internal/lograte"
	"github.com/mqtarget/mqtarget/message"
	"github.com/mqtarget/mqtarget/publishers"
	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// Options configure a Server.
type Options struct {
	Publishers     map[string]publishers.Publisher // by broker name; at least the default broker
	DefaultBroker  string
	Topic, Topic2  string
	MessageSize    int // default payload size
	MaxMessageSize int
	PublishTimeout time.Duration
	AsyncLimit     int
	AsyncMaxBytes  int64 // bounds the message bytes of async publishes in flight; 0: no bound
	// ReadTimeout bounds reading a request body, from the moment the handler starts; 0: no bound.
	ReadTimeout time.Duration
	// WriteTimeout is http.Server.WriteTimeout (which starts at the end of the request headers); it is
	// restarted at the end of a request body. 0: not restarted.
	WriteTimeout time.Duration
	// MaxRequests bounds the send requests in their handlers at once; beyond it 503. 0: no bound.
	MaxRequests int
	Registry    *prometheus.Registry // metrics are registered here and served on /metrics
	// AuthToken, when set, is the bearer token the send endpoints require (401 without it).
	AuthToken string
	// AdminSeparate takes the admin routes (/healthz, /readyz, /metrics) off ServeHTTP; AdminHandler
	// serves them instead, on a listener of their own.
	AdminSeparate bool
	// RoundTrips serve /sendRoundTrip, by broker name; a broker without one answers 501.
	RoundTrips map[string]RoundTripper
	// RoundTripTopic is /sendRoundTrip's topic without ?topic= (echo.topics[0]); empty: Topic.
	RoundTripTopic string
	// MaxDistinctTopics bounds the distinct topics each broker is sent to since start; 0: no bound.
	MaxDistinctTopics int
	// ReadyBrokers are the brokers whose hosts must all answer for /readyz to answer 200; nil: the
	// default broker. The other brokers are reported but do not fail it.
	ReadyBrokers []string
	// ReadyTimeout bounds /readyz's pings; 0: DefaultReadyTimeout.
	ReadyTimeout time.Duration
	Log          *slog.Logger
	// Setup is shown on / as the effective broker setup (hosts, embedded or not, …).
	Setup any
	// Config is served on /config: the effective configuration with its secrets already redacted.
	Config any
}

// Server holds the endpoints' shared state.
type Server struct {
	pubs           map[string]publishers.Publisher
	roundTrips     map[string]RoundTripper
	roundTripTopic string
	brokerNames    []string
	defaultBroker  string
	topic, topic2  string
	size, maxSize  int
	publishTimeout time.Duration
	deadlines      *deadlines
	ids            *message.Source
	topicSeq       roundRobin
	async          *asyncLimiter
	readTimeout    time.Duration
	writeTimeout   time.Duration
	maxRequests    int64
	requests       atomic.Int64 // send requests in their handlers
	lameDuck       atomic.Bool
	hold           atomic.Pointer[chan struct{}] // set while a shutdown holds new requests (Hold)
	token          *bearer                       // nil: no token required
	topics         *topicLimit
	adminSeparate  bool
	admin          http.Handler // the admin routes when adminSeparate, else nil
	log            *slog.Logger
	hostLog        *slog.Logger // host state changes: a flapping broker drives them, so rate-limited per host
	setup          any
	config         any
	readyBrokers   []string
	readyTimeout   time.Duration
	readyMu        sync.Mutex
	readyRound     *readyRound // the /readyz pings running, nil when none
	hostStates     hostStates
	statsState     statsState // /stats' last gathers
	started        time.Time  // for uptime, and the first /stats window
	reg            *prometheus.Registry
	sends          []Endpoint // the index's "endpoints"
	allRoutes      []Endpoint // every route, for /stats
	other          []string   // the index's "other"
	adminPaths     []string   // the index's "admin": routes on the admin listener
	handler        http.Handler
	// exact holds the main router's routes by method and path: a request for one of them skips chi,
	// which allocates a route context and a request copy per request (chi sees the others, and
	// answers 404 and 405). chi routes on RawPath when it is set, so such requests go to chi too.
	exact map[exactKey]http.Handler
}

type exactKey struct{ method, path string }

// Endpoint describes one route, for the index and the docs.
type Endpoint struct {
	Path    string   `json:"path"`
	Summary string   `json:"summary"`
	Methods []string `json:"methods"`
	// Send marks the send endpoints (listed under "endpoints" on /); the others are listed under "other".
	Send bool `json:"-"`
	// Admin marks the routes that move to http.admin_addr when it is set.
	Admin bool `json:"-"`
}

// route is one row of the endpoint table: what the index and the docs show, and the handler. The
// handler is part of the row, so a route cannot be listed without one.
type route struct {
	Endpoint
	handler func(s *Server) http.Handler
}

var (
	sendMethods = []string{http.MethodGet, http.MethodPost}
	getHead     = []string{http.MethodGet, http.MethodHead}
)

// send is a send endpoint's row; h builds its handler once per Server, so per-route state such as
// /send3Host's round-robin lives as long as the Server.
func send(path, summary string, h func(s *Server) handlerFunc) route {
	return route{Endpoint{path, summary, sendMethods, true, false},
		func(s *Server) http.Handler { return s.guarded(h(s)) }}
}

// routeTable is the one list of routes: the router, the index (GET /) and the README check in
// cmd/mqtarget are derived from it. Send endpoints come first, in the index's order.
var routeTable = []route{
	send("/send1", "1 message to topic; 200 after the broker acknowledged it",
		func(s *Server) handlerFunc { return s.send1 }),
	send("/send2", "2 messages to topic as one batch ("+brokers.Batches()+"); ?mode=sequential for two publishes in a row",
		func(s *Server) handlerFunc { return s.send2 }),
	send("/send2Topic", "1 message to topic and 1 to topic2, both in flight at once",
		func(s *Server) handlerFunc { return s.send2Topic }),
	send("/sendAsync", "1 message handed to the bounded async publisher; 202 at once, 429 when the in-flight limit is reached",
		func(s *Server) handlerFunc { return s.sendAsync }),
	send("/sendAsyncWait", "1 message published asynchronously; 200 when the broker's completion arrives",
		func(s *Server) handlerFunc { return s.sendAsyncWait }),
	send("/send2Host", "1 message, round-robin over the first 2 hosts",
		func(s *Server) handlerFunc { return s.sendNHost(2) }),
	send("/send3Host", "1 message, round-robin over the first 3 hosts",
		func(s *Server) handlerFunc { return s.sendNHost(3) }),
	// Not a send row: it answers only where round trips are configured (echo.*), so the checks that
	// every send endpoint publishes with the default setup do not apply; auth and limits do.
	{Endpoint{"/sendRoundTrip", "1 message to topic; 200 with rtt_ms once its ack came back from an echo on <topic>.ack, 504 when none came within publish_timeout, 501 without echo.roundtrip", sendMethods, false, false},
		func(s *Server) http.Handler { return s.guarded(s.sendRoundTrip) }},
	{Endpoint{"/healthz", "200 while the process serves", getHead, false, true},
		func(*Server) http.Handler { return http.HandlerFunc(healthz) }},
	{Endpoint{"/readyz", "each broker's hosts and their state; 200 when every host of the readyz.brokers answers a ping within readyz.timeout, else 503; 503 during a shutdown's lame-duck phase", getHead, false, true},
		func(s *Server) http.Handler { return http.HandlerFunc(s.readyz) }},
	{Endpoint{"/metrics", "Prometheus metrics (OpenMetrics and native histograms negotiated)", []string{http.MethodGet}, false, true},
		func(s *Server) http.Handler { return s.metrics() }},
	{Endpoint{"/stats", "the live page's numbers, read from the metrics: per endpoint and broker host the rates of the last second by status or result, latency percentiles, connections; version, uptime, host states", getHead, false, false},
		func(s *Server) http.Handler { return http.HandlerFunc(s.stats) }},
	{Endpoint{"/config", "the build (version, revision, Go version) and the effective configuration, secrets redacted, as JSON", []string{http.MethodGet}, false, false},
		func(s *Server) http.Handler { return http.HandlerFunc(s.showConfig) }},
	{Endpoint{"/", "this index as JSON: endpoints, parameters and the effective broker setup; browsers (Accept: text/html) get the live page instead", []string{http.MethodGet}, false, false},
		func(s *Server) http.Handler { return http.HandlerFunc(s.index) }},
}

// Endpoints lists every route in the table's order: the send endpoints, then the others.
func Endpoints() []Endpoint {
	out := make([]Endpoint, len(routeTable))
	for i, r := range routeTable {
		out[i] = r.Endpoint
		out[i].Methods = slices.Clone(r.Methods) // callers cannot change the table
	}
	return out
}

// New builds the Server and its routes.
func New(o Options) *Server {
	s := &Server{
		pubs:           o.Publishers,
		roundTrips:     o.RoundTrips,
		roundTripTopic: o.RoundTripTopic,
		defaultBroker:  o.DefaultBroker,
		topic:          o.Topic,
		topic2:         o.Topic2,
		size:           o.MessageSize,
		maxSize:        o.MaxMessageSize,
		publishTimeout: o.PublishTimeout,
		deadlines:      newDeadlines(o.PublishTimeout),
		ids:            message.NewSource(),
		async:          &asyncLimiter{limit: int64(o.AsyncLimit), maxBytes: o.AsyncMaxBytes},
		readTimeout:    o.ReadTimeout,
		writeTimeout:   o.WriteTimeout,
		maxRequests:    int64(o.MaxRequests),
		log:            o.Log,
		hostLog:        lograte.Logger(o.Log, lograte.New(lograte.Interval)),
		setup:          o.Setup,
		config:         o.Config,
		readyBrokers:   o.ReadyBrokers,
		readyTimeout:   o.ReadyTimeout,
		reg:            o.Registry,
		token:          newBearer(o.AuthToken),
		adminSeparate:  o.AdminSeparate,
		started:        time.Now(),
	}
	s.allRoutes = Endpoints()
	for _, e := range s.allRoutes {
		switch {
		case e.Send:
			s.sends = append(s.sends, e)
		case e.Admin && s.adminSeparate:
			s.adminPaths = append(s.adminPaths, e.Path)
		default:
			s.other = append(s.other, e.Path)
		}
	}
	for name := range o.Publishers {
		s.brokerNames = append(s.brokerNames, name)
	}
	sort.Strings(s.brokerNames)
	if s.readyBrokers == nil {
		s.readyBrokers = []string{s.defaultBroker}
	}
	if s.readyTimeout <= 0 {
		s.readyTimeout = DefaultReadyTimeout
	}
	s.topics = newTopicLimit(o.MaxDistinctTopics, s.brokerNames, s.topic)
	s.handler, s.admin = s.routes()
	return s
}

// AdminHandler serves the admin routes (/healthz, /readyz, /metrics) when Options.AdminSeparate is set,
// for a listener of their own; nil otherwise (ServeHTTP serves them).
func (s *Server) AdminHandler() http.Handler { return s.admin }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.lameDuck.Load() {
		// net/http closes the connection after this answer, so a keep-alive client reconnects (to another
		// instance) instead of sending its next request into the shutdown.
		w.Header()["Connection"] = connectionClose
	}
	var body *deadlineBody
	if r.Body != nil && r.Body != http.NoBody {
		body = s.boundBody(w, r)
	}
	if hold := s.hold.Load(); hold != nil {
		select {
		case <-*hold:
		case <-r.Context().Done(): // the handler records the client as gone
		}
	}
	if h := s.exact[exactKey{r.Method, r.URL.Path}]; h != nil && r.URL.RawPath == "" {
		h.ServeHTTP(w, r)
	} else {
		s.handler.ServeHTTP(w, r)
	}
	if body != nil && !body.eof {
		// The answer closes the connection (boundBody): net/http's last look for the body's end, after
		// the answer, need not wait for a client that will never send it.
		_ = body.rc.SetReadDeadline(time.Now())
	}
}

// Hold makes the requests that reach ServeHTTP from now on wait, before their handlers, until release
// is called; release is idempotent. A shutdown holds requests while it drains the listen backlog: a
// client waiting for its answer does not reconnect, so the backlog empties.
func (s *Server) Hold() (release func()) {
	ch := make(chan struct{})
	s.hold.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.hold.Store(nil)
			close(ch)
		})
	}
}

var connectionClose = []string{"close"}

// EnterLameDuck starts the lame-duck phase before a shutdown: /readyz answers 503 and every answer
// carries "Connection: close", while requests are still served.
func (s *Server) EnterLameDuck() { s.lameDuck.Store(true) }

// boundBody gives the client readTimeout to send the body, and closes the connection after any answer
// given before the body was read to its end.
//
// The deadline is a connection read deadline, not http.Server.ReadTimeout: that one also stays on the
// connection while the handler runs, and when net/http's background read (which watches for the client
// going away) hits it, it cancels the request's context, so every request slower than the timeout would
// look like a client that left. Here the deadline is lifted as soon as the body is read, and the write
// deadline (http.write_timeout) restarts then, so a slow upload does not eat into the time to answer.
//
// The answer says "Connection: close" until the body has been read: an error answer (400, 401, 413, 503)
// to a body the handler never read is then sent at once, and net/http neither reads up to 256 KiB of the
// unread body first nor, for "Expect: 100-continue", invites the client to send it. (Replacing r.Body
// hides net/http's own body type from its checks, so they cannot do this themselves.)
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) *deadlineBody {
	rc := http.NewResponseController(w)
	if s.readTimeout > 0 && rc.SetReadDeadline(time.Now().Add(s.readTimeout)) != nil {
		return nil // not a net/http connection (tests' recorders)
	}
	h := w.Header()
	h["Connection"] = connectionClose
	b := &deadlineBody{ReadCloser: r.Body, rc: rc, h: h, s: s}
	r.Body = b
	return b
}

// deadlineBody lifts the connection's read deadline, restarts its write deadline, and lets the
// connection be kept alive once the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	h     http.Header
	s     *Server
	ended bool // the body returned an error: io.EOF or another
	eof   bool // the body was read to its end
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil || b.ended {
		return n, err
	}
	// The body ended: read to its end, cut by http.read_timeout (whose 408 must still go out), or broken.
	b.ended = true
	if b.s.writeTimeout > 0 {
		_ = b.rc.SetWriteDeadline(time.Now().Add(b.s.writeTimeout))
	}
	if err == io.EOF {
		b.eof = true
		if b.s.readTimeout > 0 {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		if !b.s.lameDuck.Load() {
			delete(b.h, "Connection")
		}
	}
	return n, err
}

// guarded is a send route's handler: the bearer token (checkToken), then a request slot, then h, whose
// error becomes the answer (adapt); one closure per request instead of three. The slot bound answers
// 503 at once when maxRequests send requests are already in their handlers, so overload shows as fast
// refusals instead of unbounded memory and latency.
func (s *Server) guarded(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkToken(w, r); err != nil {
			s.fail(w, r, err)
			return
		}
		if s.maxRequests > 0 {
			defer s.requests.Add(-1)
			if s.requests.Add(1) > s.maxRequests {
				w.Header()["Retry-After"] = retryAfter
				s.fail(w, r, &Error{Status: http.StatusServiceUnavailable, Field: "http.max_requests",
					Msg: "too many requests in progress (http.max_requests = " + strconv.FormatInt(s.maxRequests, 10) + ")"})
				return
			}
		}
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	}
}

var retryAfter = []string{"1"}

// DrainAsync refuses new async publishes and waits for those in flight until ctx ends.
func (s *Server) DrainAsync(ctx context.Context) AsyncStats { return s.async.drain(ctx) }

// routes builds the main router and, with adminSeparate, the admin router, both from routeTable: each
// row goes to exactly one of them.
func (s *Server) routes() (main, admin http.Handler) {
	reg := s.reg
	hm := &httpMetrics{lameDuck: &s.lameDuck}
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            "mqtarget_http_request_duration_seconds",
		Help:                            "HTTP request latency by route pattern, method and status code.",
		Buckets:                         publishers.LatencyBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"route", "method", "code"})
	hm.duration = duration
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mqtarget_http_requests_in_flight",
		Help: "HTTP requests being served.",
	}, func() float64 { return float64(hm.inFlight.Load()) })
	reg.MustRegister(duration, inFlight,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mqtarget_async_in_flight",
			Help: "Async publishes handed to a broker client and not yet completed.",
		}, func() float64 { return float64(s.async.inFlight.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mqtarget_async_in_flight_limit",
			Help: "The async in-flight limit (async.max_in_flight).",
		}, func() float64 { return float64(s.async.limit) }),
	)
	for _, c := range []struct {
		result string
		v      func() int64
	}{
		{"accepted", s.async.accepted.Load},
		{"rejected", s.async.rejected.Load},
		{"acked", s.async.acked.Load},
		{"failed", s.async.failed.Load},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "mqtarget_async_messages_total",
			Help:        "Async publishes by outcome: accepted (202), rejected (429), acked or failed by the broker.",
			ConstLabels: prometheus.Labels{"result": c.result},
		}, func() float64 { return float64(c.v()) }))
	}

	newRouter := func() *chi.Mux {
		r := chi.NewRouter()
		r.NotFound(s.adapt(func(w http.ResponseWriter, r *http.Request) error {
			return &Error{Status: http.StatusNotFound, Msg: "no such endpoint " + cut(r.URL.Path) + "; GET / lists them"}
		}))
		r.MethodNotAllowed(s.adapt(func(w http.ResponseWriter, r *http.Request) error {
			// RFC 9110: a 405 says which methods the resource takes.
			for _, rt := range routeTable {
				if rt.Path == r.URL.Path {
					w.Header().Set("Allow", strings.Join(rt.Methods, ", "))
				}
			}
			return &Error{Status: http.StatusMethodNotAllowed, Msg: cut(r.Method) + " is not allowed on " + cut(r.URL.Path)}
		}))
		return r
	}
	mainR := newRouter()
	s.exact = map[exactKey]http.Handler{}
	var adminR *chi.Mux
	if s.adminSeparate {
		adminR = newRouter()
		admin = adminR
	}
	// Each route is instrumented with its pattern as the label, so paths never become labels.
	for _, rt := range routeTable {
		h := hm.instrument(hm.route(rt.Path, rt.Methods), rt.handler(s))
		r := mainR
		if rt.Admin && adminR != nil {
			r = adminR
		}
		for _, m := range rt.Methods {
			r.Method(m, rt.Path, h)
			if r == mainR {
				s.exact[exactKey{m, rt.Path}] = h
			}
		}
	}
	return mainR, admin
}

var healthzBody = []byte(`{"status":"ok"}` + "\n")

func healthz(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, healthzBody) }

// index lists the endpoints, their parameters and the effective broker setup.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		writeError(w, http.StatusNotFound, "", "no such endpoint "+cut(r.URL.Path)+"; GET / lists them", 0)
		return
	}
	w.Header().Add("Vary", "Accept")
	if wantsHTML(r.Header.Values("Accept")) {
		servePage(w, r)
		return
	}
	brokers := map[string]any{}
	for name, p := range s.pubs {
		b := map[string]any{"hosts": p.Hosts()}
		if v, ok := p.(publishers.BrokerVersioner); ok {
			// What each host said it runs at its last handshake ("" before the first): dynamic, unlike
			// the setup's versions of embedded brokers.
			versions := make([]string, len(p.Hosts()))
			for h := range versions {
				versions[h] = v.BrokerVersion(h)
			}
			b["versions"] = versions
		}
		brokers[name] = b
	}
	body, _ := json.MarshalIndent(map[string]any{
		"endpoints": s.sends,
		"parameters": map[string]string{
			"broker": "broker name (default " + s.defaultBroker + ")",
			"topic":  "topic (default " + s.topic + ")",
			"topic2": "second topic of /send2Topic (default " + s.topic2 + ")",
			"size":   "payload bytes, 1..message.max_size",
			"topics": "spread messages round-robin over N topics named <topic>-<k>",
			"mode":   "batch (default) or sequential, for /send2",
			"body":   "a POST body is the payload, up to message.max_size bytes",
		},
		"default_broker":  s.defaultBroker,
		"brokers":         brokers,
		"setup":           s.setup,
		"message_size":    s.size,
		"max_size":        s.maxSize,
		"publish_timeout": s.publishTimeout.String(),
		"async_limit":     s.async.limit,
		"other":           s.other,
		"admin":           s.adminPaths, // null unless http.admin_addr is set
	}, "", "  ")
	writeJSON(w, http.StatusOK, append(body, '\n'))
}
