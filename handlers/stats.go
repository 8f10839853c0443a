package handlers

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// /stats serves the live page's numbers, read from the Prometheus registry the metrics are kept in:
// the page shows what /metrics says, with no bookkeeping of its own. Rates and latency percentiles are
// the differences between two gathers at least statsEvery apart, so every viewer sees the same window
// and a page polling every second costs one gather per second however many pages are open.
const (
	statsEvery      = time.Second
	statsStateEvery = 5 * time.Second // how often /stats pings the broker hosts for their state
	// statsStale: a last gather older than this would make the window an average over a past nobody
	// watched (a page opened after a quiet hour showed the hour's average as the current rate, and a
	// busy endpoint beside an idle one at the same "rate"). The poll then takes a fresh gather and one
	// statsEvery later another, so the first frame shows the last second, like every frame after it.
	statsStale = 3 * statsEvery
)

// Metric names /stats reads; the metrics are registered in this package and in publishers.
const (
	mHTTPDuration    = "mqtarget_http_request_duration_seconds"
	mPublishDuration = "mqtarget_publish_duration_seconds"
	mPublishMessages = "mqtarget_publish_messages_total"
	mPublishBytes    = "mqtarget_publish_bytes_total"
	mConnections     = "mqtarget_broker_connections_total"
	mReconnects      = "mqtarget_broker_reconnects_total"
	mDialFailures    = "mqtarget_broker_dial_failures_total"
	mAsyncInFlight   = "mqtarget_async_in_flight"
	mAsyncLimit      = "mqtarget_async_in_flight_limit"
	mBuildInfo       = "mqtarget_build_info"
)

// Stats is /stats' answer. Label values are bounded: routes come from the route table, brokers and
// hosts from the configuration, statuses and results from small fixed sets.
type Stats struct {
	Version       string          `json:"version"`
	Revision      string          `json:"revision"`
	GoVersion     string          `json:"go_version"`
	UptimeSeconds float64         `json:"uptime_s"`
	WindowSeconds float64         `json:"window_s"` // the window the rates and percentiles cover
	DefaultBroker string          `json:"default_broker"`
	StateAge      float64         `json:"state_age_s"` // how old the hosts' states are
	Async         AsyncGauge      `json:"async"`
	Endpoints     []EndpointStats `json:"endpoints"`
	Brokers       []HostStats     `json:"brokers"`
}

// AsyncGauge is the async publishes in flight and their limit.
type AsyncGauge struct {
	InFlight float64 `json:"in_flight"`
	Limit    float64 `json:"limit"`
}

// Percentiles are latencies in milliseconds, interpolated within histogram buckets like PromQL's
// histogram_quantile; nil when the window saw nothing.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// EndpointStats is one route's HTTP answers.
type EndpointStats struct {
	Route         string             `json:"route"`
	Rate          float64            `json:"rate"` // answers per second, all statuses
	RateByStatus  map[string]float64 `json:"rate_by_status"`
	Total         uint64             `json:"total"` // answers since start
	TotalByStatus map[string]uint64  `json:"total_by_status"`
	Latency       *Percentiles       `json:"latency_ms"`
}

// HostStats is one broker host's publishes and connections.
type HostStats struct {
	Broker        string             `json:"broker"`
	Host          string             `json:"host"`
	State         string             `json:"state"` // up or down at the last ping; "" before the first
	StateError    string             `json:"state_error,omitempty"`
	Rate          float64            `json:"rate"` // messages per second, all results
	RateByResult  map[string]float64 `json:"rate_by_result"`
	Total         uint64             `json:"total"`
	TotalByResult map[string]uint64  `json:"total_by_result"`
	BytesRate     float64            `json:"bytes_rate"` // acknowledged payload bytes per second
	Latency       *Percentiles       `json:"latency_ms"`
	Connections   uint64             `json:"connections"`
	Reconnects    uint64             `json:"reconnects"`
	DialFailures  uint64             `json:"dial_failures"`
}

// hist is a classic histogram summed over the labels /stats does not show.
type hist struct {
	bounds []float64 // upper bounds, +Inf excluded
	cum    []uint64  // cumulative counts per bound
	count  uint64
}

func (h *hist) add(m *dto.Histogram) {
	bs := m.GetBucket()
	if h.bounds == nil {
		for _, b := range bs {
			if !math.IsInf(b.GetUpperBound(), 1) {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
		}
		h.cum = make([]uint64, len(h.bounds))
	}
	for i, b := range bs {
		if i < len(h.cum) && b.GetUpperBound() == h.bounds[i] {
			h.cum[i] += b.GetCumulativeCount()
		}
	}
	h.count += m.GetSampleCount()
}

// percentiles of the observations between older and h (older may be empty), in milliseconds.
func (h *hist) percentiles(older *hist) *Percentiles {
	n := h.count - older.count
	if n == 0 || h.bounds == nil {
		return nil
	}
	delta := make([]uint64, len(h.cum))
	for i, c := range h.cum {
		delta[i] = c
		if i < len(older.cum) {
			delta[i] -= older.cum[i]
		}
	}
	q := func(q float64) float64 { return quantile(q, h.bounds, delta, n) * 1000 }
	return &Percentiles{P50: q(0.5), P90: q(0.9), P99: q(0.99)}
}

// quantile interpolates linearly within the bucket holding rank q·n, as histogram_quantile does; ranks
// in the +Inf bucket get the highest finite bound.
func quantile(q float64, bounds []float64, cum []uint64, n uint64) float64 {
	rank := q * float64(n)
	for i, c := range cum {
		if float64(c) < rank {
			continue
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = bounds[i-1], cum[i-1]
		}
		in := c - below
		if in == 0 {
			return bounds[i]
		}
		return lo + (bounds[i]-lo)*(rank-float64(below))/float64(in)
	}
	return bounds[len(bounds)-1]
}

// counts are a counter's values by one label, summed over the others.
type counts map[string]uint64

// snapshot is one gather of the registry.
type snapshot struct {
	at     time.Time
	routes map[string]*routeSnap
	hosts  map[[2]string]*hostSnap // broker, host
	async  AsyncGauge
	build  map[string]string
}

type routeSnap struct {
	byCode counts
	lat    hist
}

type hostSnap struct {
	byResult                   counts
	bytes                      float64
	lat                        hist
	conns, reconns, dialFailed uint64
}

func newSnapshot(at time.Time) *snapshot {
	return &snapshot{at: at, routes: map[string]*routeSnap{}, hosts: map[[2]string]*hostSnap{}}
}

func (s *snapshot) route(r string) *routeSnap {
	if s.routes[r] == nil {
		s.routes[r] = &routeSnap{byCode: counts{}}
	}
	return s.routes[r]
}

func (s *snapshot) host(broker, host string) *hostSnap {
	k := [2]string{broker, host}
	if s.hosts[k] == nil {
		s.hosts[k] = &hostSnap{byResult: counts{}}
	}
	return s.hosts[k]
}

// gather reads the metrics /stats shows from the registry.
func (s *Server) gather(now time.Time) (*snapshot, error) {
	mfs, err := s.reg.Gather()
	snap := newSnapshot(now)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetName() {
			case mHTTPDuration:
				r := snap.route(l["route"])
				r.byCode[l["code"]] += m.GetHistogram().GetSampleCount()
				r.lat.add(m.GetHistogram())
			case mPublishDuration:
				snap.host(l["broker"], l["host"]).lat.add(m.GetHistogram())
			case mPublishMessages:
				snap.host(l["broker"], l["host"]).byResult[l["result"]] += uint64(m.GetCounter().GetValue())
			case mPublishBytes:
				snap.host(l["broker"], l["host"]).bytes += m.GetCounter().GetValue()
			case mConnections:
				snap.host(l["broker"], l["host"]).conns = uint64(m.GetCounter().GetValue())
			case mReconnects:
				snap.host(l["broker"], l["host"]).reconns = uint64(m.GetCounter().GetValue())
			case mDialFailures:
				snap.host(l["broker"], l["host"]).dialFailed = uint64(m.GetCounter().GetValue())
			case mAsyncInFlight:
				snap.async.InFlight = m.GetGauge().GetValue()
			case mAsyncLimit:
				snap.async.Limit = m.GetGauge().GetValue()
			case mBuildInfo:
				snap.build = l
			}
		}
	}
	return snap, err
}

// statsState is what /stats keeps between requests: the two last gathers and the hosts' states.
type statsState struct {
	mu        sync.Mutex
	prev, cur *snapshot
	hosts     map[string]*brokerCheck
	hostsAt   time.Time // zero: not pinged yet
}

// stats answers the live page's poll.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.currentStats(r.Context(), time.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "", "gathering metrics: "+err.Error(), 0)
		return
	}
	body, _ := json.Marshal(st)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, append(body, '\n'))
}

// currentStats gathers when the last gather is statsEvery old, pings the hosts when their states are
// statsStateEvery old, and computes the rates between the two last gathers (the first time: since
// start; after statsStale without a poll: over the second after this poll).
func (s *Server) currentStats(ctx context.Context, now time.Time) (*Stats, error) {
	ss := &s.statsState
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.cur == nil || now.Sub(ss.cur.at) >= statsEvery {
		prev := ss.cur
		if prev == nil {
			prev = newSnapshot(s.started)
		}
		if now.Sub(prev.at) > statsStale {
			fresh, err := s.gather(now)
			if err != nil {
				return nil, err
			}
			// Other polls wait on mu meanwhile, and then get this window too.
			t := time.NewTimer(statsEvery)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
			prev, now = fresh, now.Add(statsEvery)
		}
		snap, err := s.gather(now)
		if err != nil {
			return nil, err
		}
		ss.prev, ss.cur = prev, snap
	}
	if ss.hostsAt.IsZero() || now.Sub(ss.hostsAt) >= statsStateEvery {
		// The states answer every poll for statsStateEvery: the pings are not this client's, whose
		// hanging up would mark every host down for the others (as /readyz's shared rounds).
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.readyTimeout)
		ss.hosts = s.checkHosts(pctx)
		cancel()
		ss.hostsAt = now
	}
	return s.diff(ss.prev, ss.cur, ss.hosts, now.Sub(ss.hostsAt)), nil
}

// diff computes the Stats between two gathers.
func (s *Server) diff(prev, cur *snapshot, hosts map[string]*brokerCheck, stateAge time.Duration) *Stats {
	win := cur.at.Sub(prev.at).Seconds()
	rate := func(n, old uint64) float64 {
		if win <= 0 || n < old {
			return 0
		}
		return float64(n-old) / win
	}
	st := &Stats{
		Version: cur.build["version"], Revision: cur.build["revision"], GoVersion: cur.build["goversion"],
		UptimeSeconds: cur.at.Sub(s.started).Seconds(), WindowSeconds: win,
		DefaultBroker: s.defaultBroker, StateAge: stateAge.Seconds(), Async: cur.async,
		Endpoints: []EndpointStats{}, Brokers: []HostStats{},
	}
	for _, e := range s.allRoutes {
		r, ok := cur.routes[e.Path]
		if !e.Send && (!ok || e.Admin || e.Path == "/" || e.Path == "/stats" || e.Path == "/config") {
			continue // the send endpoints always; others only when used, and not the page's own or /config
		}
		if r == nil {
			r = &routeSnap{}
		}
		old := prev.routes[e.Path]
		if old == nil {
			old = &routeSnap{}
		}
		es := EndpointStats{Route: e.Path, RateByStatus: map[string]float64{}, TotalByStatus: map[string]uint64{},
			Latency: r.lat.percentiles(&old.lat)}
		for code, n := range r.byCode {
			es.Total += n
			es.TotalByStatus[code] = n
			es.RateByStatus[code] = rate(n, old.byCode[code])
			es.Rate += es.RateByStatus[code]
		}
		st.Endpoints = append(st.Endpoints, es)
	}
	for _, name := range s.brokerNames {
		var states []hostCheck
		if b := hosts[name]; b != nil {
			states = b.Hosts
		}
		for i, addr := range s.pubs[name].Hosts() {
			h := cur.hosts[[2]string{name, addr}]
			if h == nil {
				h = &hostSnap{byResult: counts{}}
			}
			old := prev.hosts[[2]string{name, addr}]
			if old == nil {
				old = &hostSnap{}
			}
			hs := HostStats{Broker: name, Host: addr, RateByResult: map[string]float64{}, TotalByResult: map[string]uint64{},
				Latency: h.lat.percentiles(&old.lat), Connections: h.conns, Reconnects: h.reconns, DialFailures: h.dialFailed}
			if i < len(states) {
				hs.State, hs.StateError = states[i].State, states[i].Error
			}
			for res, n := range h.byResult {
				if n == 0 {
					continue
				}
				hs.Total += n
				hs.TotalByResult[res] = n
				hs.RateByResult[res] = rate(n, old.byResult[res])
				hs.Rate += hs.RateByResult[res]
			}
			if win > 0 && h.bytes >= old.bytes {
				hs.BytesRate = (h.bytes - old.bytes) / win
			}
			st.Brokers = append(st.Brokers, hs)
		}
	}
	return st
}
