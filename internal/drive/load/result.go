package load

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result summarises one run. Only 2xx answers are throughput; every other status is counted by code,
// and requests without an HTTP answer are errors.
type Result struct {
	Requests   int64            `json:"requests"`
	OK         int64            `json:"ok"`        // 2xx
	ByStatus   map[string]int64 `json:"by_status"` // status code → answers
	Errors     int64            `json:"errors"`    // no HTTP answer (transport)
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	// ErrorBodies are up to 3 distinct beginnings (256 bytes, one line) of the bodies of each non-2xx
	// status: what the target said.
	ErrorBodies map[string][]string `json:"error_bodies,omitempty"`
	// NotSent counts the open model's requests that were due within the duration and never sent (still
	// not a second after the end: every worker busy, or the pacer behind): the generator fell behind. Not 0 means the offered rate
	// was not offered.
	NotSent    int64   `json:"not_sent,omitempty"`
	Throughput float64 `json:"throughput"` // 2xx per second
	DurationS  float64 `json:"duration_s"` // from the first send to the last answer
	// Latency counts in the open model from each request's intended send time, in the closed model from
	// the actual one.
	Latency Latency `json:"latency_ms"`
	// Open model only: Service counts from the actual send (what wrk, hey and vegeta show), Lag from the
	// intended to the actual send (the generator's own lateness; Latency ≈ Lag + Service).
	Service *Latency `json:"service_ms,omitempty"`
	Lag     *Latency `json:"lag_ms,omitempty"`
	// Warmup counts what was sent during -warmup, apart: none of it is in the numbers above.
	Warmup *Phase `json:"warmup,omitempty"`
	// Histograms hold every latency above as buckets, so results can be merged (Merge, mqtarget report).
	Histograms Histograms `json:"histograms"`
	Meta       Meta       `json:"meta"`
}

// Histograms are a result's latencies as mergeable histograms (service and lag: open model only).
type Histograms struct {
	Latency *Histogram `json:"latency_us"`
	Service *Histogram `json:"service_us,omitempty"`
	Lag     *Histogram `json:"lag_us,omitempty"`
}

// Phase is the count of a part of a run reported apart (the warm-up).
type Phase struct {
	Requests  int64            `json:"requests"`
	OK        int64            `json:"ok"`
	ByStatus  map[string]int64 `json:"by_status"`
	Errors    int64            `json:"errors"`
	DurationS float64          `json:"duration_s"`
	Latency   Latency          `json:"latency_ms"`
	Histogram *Histogram       `json:"latency_us"`
}

// Check reports a failed run: no 2xx answer at all, or more than maxErrorRate (0..1) of the requests
// answered non-2xx or not at all.
func (r *Result) Check(maxErrorRate float64) error {
	bad := r.NonOK() + r.Errors
	switch {
	case r.Requests == 0:
		return errors.New("no request was sent")
	case r.OK == 0:
		return fmt.Errorf("no 2xx answer: %s", r.failures())
	case float64(bad) > maxErrorRate*float64(r.Requests):
		return fmt.Errorf("%.2f%% of the requests failed, more than -max-error-rate %g%%: %s",
			100*float64(bad)/float64(r.Requests), 100*maxErrorRate, r.failures())
	}
	return nil
}

// failures says what went wrong, briefly: statuses other than 2xx and transport errors.
func (r *Result) failures() string {
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(r.ByStatus)) {
		if !strings.HasPrefix(c, "2") {
			parts = append(parts, fmt.Sprintf("%d × %s", r.ByStatus[c], c))
		}
	}
	if r.Errors > 0 {
		parts = append(parts, fmt.Sprintf("%d without an answer", r.Errors))
	}
	return strings.Join(parts, ", ")
}

// Latency holds percentiles in milliseconds over every request that got an answer (any status).
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Meta says what was run, where and when.
type Meta struct {
	Version     string `json:"version"` // of this load generator
	Cores       int    `json:"cores"`
	GoMaxProcs  int    `json:"gomaxprocs"`
	Model       string `json:"model"` // open or closed
	Rate        int    `json:"rate,omitempty"`
	RateTo      int    `json:"rate_to,omitempty"` // a ramp: from rate to rate_to over the duration
	Connections int    `json:"connections,omitempty"`
	// Shard is "i/N" when this run was shard i (from 0) of N: its share of the rate or connections.
	Shard string `json:"shard,omitempty"`
	// Shards are the shards a merged result was made of (mqtarget report), in order.
	Shards     []string          `json:"shards,omitempty"`
	Warmup     string            `json:"warmup,omitempty"`
	MaxWorkers int               `json:"max_workers,omitempty"`
	Duration   string            `json:"duration"`
	Timeout    string            `json:"timeout"`
	Method     string            `json:"method"`
	BodyBytes  int               `json:"body_bytes"`
	URL        string            `json:"url"`
	Endpoint   string            `json:"endpoint"`   // the URL's path
	Parameters map[string]string `json:"parameters"` // the URL's query
	Broker     string            `json:"broker,omitempty"`
	// BrokerVersion is what the target says of the broker's version: for embedded brokers the linked
	// module's, for external ones what a host said at its handshake; empty when unknown.
	BrokerVersion string    `json:"broker_version,omitempty"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	// Interrupted: the run was stopped before its duration (a signal).
	Interrupted bool    `json:"interrupted,omitempty"`
	Target      *Target `json:"target,omitempty"`
}

func (m *Meta) setEndpoint(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	m.URL = redactURL(u)
	m.Endpoint = u.Path
	m.Parameters = map[string]string{}
	for k, v := range u.Query() {
		m.Parameters[k] = strings.Join(v, ",")
	}
	m.Broker = m.Parameters["broker"]
	if m.Target == nil {
		return
	}
	if m.Broker == "" {
		m.Broker = m.Target.DefaultBroker
	}
	if setup, ok := m.Target.Brokers[m.Broker].(map[string]any); ok {
		m.BrokerVersion, _ = setup["version"].(string)
	}
	if m.BrokerVersion == "" {
		// An external broker: what its first host said it runs, else any of its hosts.
		for _, v := range m.Target.BrokerVersions[m.Broker] {
			if v != "" {
				m.BrokerVersion = v
				break
			}
		}
	}
}

// redactURL drops a password from the URL: results are files people share.
func redactURL(u *url.URL) string {
	c := *u
	if _, ok := c.User.Password(); ok {
		c.User = url.UserPassword(c.User.Username(), "redacted")
	}
	return c.String()
}

// Formats are the output formats of Write.
var Formats = []string{"table", "json", "csv"}

// Write prints r as format.
func (r *Result) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "csv":
		cw := csv.NewWriter(w)
		_ = cw.Write(CSVHeader)
		_ = cw.Write(r.CSVRow())
		cw.Flush()
		return cw.Error()
	case "table":
		return r.writeTable(w)
	}
	return fmt.Errorf("unknown format %q", format)
}

// CSVHeader names the columns of CSVRow.
var CSVHeader = []string{"endpoint", "broker", "model", "connections", "rate", "size", "topics", "duration_s",
	"requests", "ok", "non_2xx", "errors", "not_sent", "throughput", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms",
	"by_status", "start", "end", "service_p50_ms", "service_p99_ms", "lag_p50_ms", "lag_p99_ms"}

// CSVRow is r as one CSV row under CSVHeader; by_status is "code:count" pairs joined by spaces.
func (r *Result) CSVRow() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{r.Meta.Endpoint, r.Meta.Broker, r.Meta.Model, strconv.Itoa(r.Meta.Connections), strconv.Itoa(r.Meta.Rate),
		r.Meta.Parameters["size"], r.Meta.Parameters["topics"], f(round3(r.DurationS)),
		i(r.Requests), i(r.OK), i(r.NonOK()), i(r.Errors), i(r.NotSent), f(round3(r.Throughput)),
		f(r.Latency.P50), f(r.Latency.P90), f(r.Latency.P99), f(r.Latency.P999), f(r.Latency.Max), f(r.Latency.Mean),
		r.StatusList(), r.Meta.Start.Format(time.RFC3339Nano), r.Meta.End.Format(time.RFC3339Nano),
		opt(r.Service, func(l *Latency) float64 { return l.P50 }), opt(r.Service, func(l *Latency) float64 { return l.P99 }),
		opt(r.Lag, func(l *Latency) float64 { return l.P50 }), opt(r.Lag, func(l *Latency) float64 { return l.P99 })}
}

// opt is a percentile of an open-model latency, empty in the closed model.
func opt(l *Latency, p func(*Latency) float64) string {
	if l == nil {
		return ""
	}
	return strconv.FormatFloat(p(l), 'f', -1, 64)
}

// NonOK counts the answers that were not 2xx.
func (r *Result) NonOK() int64 { return r.Requests - r.Errors - r.OK }

// StatusList is by_status as "code:count" pairs in code order, e.g. "200:97 503:3".
func (r *Result) StatusList() string {
	codes := slices.Sorted(maps.Keys(r.ByStatus))
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = c + ":" + strconv.FormatInt(r.ByStatus[c], 10)
	}
	return strings.Join(parts, " ")
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

func (r *Result) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	load := fmt.Sprintf("%d connections (closed model)", r.Meta.Connections)
	if r.Meta.Model == Open {
		load = fmt.Sprintf("%d requests/s (open model)", r.Meta.Rate)
		if r.Meta.RateTo > 0 {
			load = fmt.Sprintf("%d → %d requests/s, a linear ramp (open model)", r.Meta.Rate, r.Meta.RateTo)
		}
	}
	switch {
	case r.Meta.Shard != "":
		load += ", shard " + r.Meta.Shard + " of it"
	case len(r.Meta.Shards) > 0:
		load += fmt.Sprintf(", merged from %d shards", len(r.Meta.Shards))
	}
	target := "not a mqtarget (or it did not say)"
	if t := r.Meta.Target; t != nil {
		target = "mqtarget " + t.Version
	}
	rows := [][2]string{
		{"url", r.Meta.Method + " " + r.Meta.URL},
		{"target", target},
		{"broker", strings.TrimSpace(r.Meta.Broker + " " + r.Meta.BrokerVersion)},
		{"load", load},
		{"duration", fmt.Sprintf("%.3fs (asked %s)", r.DurationS, r.Meta.Duration)},
		{"requests", strconv.FormatInt(r.Requests, 10)},
		{"ok (2xx)", strconv.FormatInt(r.OK, 10)},
		{"by status", r.StatusList()},
		{"errors (no answer)", strconv.FormatInt(r.Errors, 10)},
		{"not sent (generator behind)", strconv.FormatInt(r.NotSent, 10)},
		{"throughput", fmt.Sprintf("%.1f 2xx/s", r.Throughput)},
	}
	if w := r.Warmup; w != nil {
		rows = append(rows, [2]string{"warm-up (not counted)", fmt.Sprintf("%s: %d requests, %d ok, %d errors", r.Meta.Warmup, w.Requests, w.OK, w.Errors)})
	}
	pct := func(l Latency) string {
		return fmt.Sprintf("p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f", l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	if r.Service != nil && r.Lag != nil {
		rows = append(rows, [2]string{"latency ms (from due)", pct(r.Latency)},
			[2]string{"service ms (from sent)", pct(*r.Service)}, [2]string{"lag ms (due → sent)", pct(*r.Lag)})
	} else {
		rows = append(rows, [2]string{"latency ms", pct(r.Latency)})
	}
	for _, code := range slices.Sorted(maps.Keys(r.ErrorBodies)) {
		for _, b := range r.ErrorBodies[code] {
			rows = append(rows, [2]string{"  " + code + " said", strconv.Quote(b)})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
		rows = append(rows, [2]string{"  error", fmt.Sprintf("%d × %s", r.ErrorKinds[k], k)})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}
