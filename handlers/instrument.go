package handlers

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics is mqtarget_http_request_duration_seconds and mqtarget_http_requests_in_flight, observed
// by hand instead of by promhttp's InstrumentHandlerDuration and InstrumentHandlerInFlight: those built
// a label map and looked the child up by it on every request, and allocated a ResponseWriter delegator
// (21 % of /send1's CPU under wrk together, issue #17). The labels are the same (route pattern,
// promhttp's lower-case method, the status code), so dashboards and /stats read them unchanged.
type httpMetrics struct {
	duration *prometheus.HistogramVec
	inFlight atomic.Int64 // read by a GaugeFunc: one atomic add per request instead of a gauge's CAS loop
	lameDuck *atomic.Bool // the server's lame-duck flag (nil: none); see statusWriter.WriteHeader
}

// Status codes are cached for 100..599; net/http refuses others.
const (
	minCode = 100
	nCodes  = 500
)

// routeObs resolves one route's duration children lazily, once per method and code, so a request does
// no label lookup: an array index and an atomic load.
type routeObs struct {
	vec     *prometheus.HistogramVec
	route   string
	methods []string // as promhttp labels them: "get", "post", "head"
	obs     [][nCodes]atomic.Pointer[prometheus.Observer]
}

func (m *httpMetrics) route(path string, methods []string) *routeObs {
	ro := &routeObs{vec: m.duration, route: path, obs: make([][nCodes]atomic.Pointer[prometheus.Observer], len(methods))}
	for _, meth := range methods {
		ro.methods = append(ro.methods, methodLabel(meth))
	}
	return ro
}

// observer returns the child for method and code; chi only routes a route's own methods here.
func (ro *routeObs) observer(method string, code int) prometheus.Observer {
	mi := -1
	label := methodLabel(method)
	for i, l := range ro.methods {
		if l == label {
			mi = i
			break
		}
	}
	if mi < 0 || code < minCode || code >= minCode+nCodes {
		return ro.vec.WithLabelValues(ro.route, label, strconv.Itoa(code))
	}
	slot := &ro.obs[mi][code-minCode]
	if o := slot.Load(); o != nil {
		return *o
	}
	o := ro.vec.WithLabelValues(ro.route, label, strconv.Itoa(code))
	slot.Store(&o) // a concurrent first use stores the same child
	return o
}

// methodLabel is promhttp's method label: lower case for the standard methods, "unknown" otherwise.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodHead:
		return "head"
	case http.MethodPut:
		return "put"
	case http.MethodDelete:
		return "delete"
	case http.MethodConnect:
		return "connect"
	case http.MethodOptions:
		return "options"
	case http.MethodPatch:
		return "patch"
	case http.MethodTrace:
		return "trace"
	case "NOTIFY":
		return "notify"
	}
	return "unknown"
}

// instrument times h with one clock read at each end and counts it in flight; a recycled wrapper of
// the writer learns the status code.
func (m *httpMetrics) instrument(ro *routeObs, h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m.inFlight.Add(1)
		sw := statusWriters.Get().(*statusWriter)
		sw.ResponseWriter, sw.status, sw.start, sw.lameDuck = w, 0, time.Now(), m.lameDuck
		h.ServeHTTP(sw, r)
		code, start := sw.status, sw.start
		sw.ResponseWriter = nil
		statusWriters.Put(sw)
		if code == 0 {
			code = http.StatusOK // nothing written: net/http answers 200
		}
		ro.observer(r.Method, code).Observe(time.Since(start).Seconds())
		m.inFlight.Add(-1)
	}
}

// statusWriter remembers the status code written through it. It is recycled (statusWriters): nothing
// keeps a ResponseWriter past its handler's return.
type statusWriter struct {
	http.ResponseWriter
	status   int
	start    time.Time // the request's one clock read: its HTTP duration and its publish deadline start here
	lameDuck *atomic.Bool
}

var statusWriters = sync.Pool{New: func() any { return new(statusWriter) }}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are interim; the final code is what is recorded
		w.status = code
		w.closeInLameDuck()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.closeInLameDuck()
	}
	return w.ResponseWriter.Write(b)
}

// closeInLameDuck marks the answer "Connection: close" when the lame-duck phase began while its request
// was in its handler (ServeHTTP marks those that began after): a keep-alive answer then would leave the
// connection idle into the shutdown, which closes idle connections, resetting the client's next
// request sent at that moment (a /send1 slower than the lame duck and the drain lost the /sendAsync
// its client sent next in a busy CI run).
func (w *statusWriter) closeInLameDuck() {
	if w.lameDuck != nil && w.lameDuck.Load() {
		w.Header()["Connection"] = connectionClose
	}
}

// Unwrap lets http.ResponseController (deadlines, Flush) reach net/http's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher for handlers that stream.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
