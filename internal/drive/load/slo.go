package load

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SLO is a latency and error goal a run meets or breaks, e.g. "p99<10ms,errors<0.1%". Latencies are
// latency_ms's (in the open model from each request's due time); errors is the share of requests
// answered non-2xx or not at all. A run whose generator fell behind (not_sent) breaks every goal: it
// did not offer the rate, so nothing is known of the target at it.
type SLO struct {
	terms []sloTerm
	text  string
}

type sloTerm struct {
	metric string // p50 p90 p99 p999 max mean errors
	orEq   bool   // <= rather than <
	value  float64
}

// ParseSLO parses comma-separated goals: METRIC<VALUE or METRIC<=VALUE, METRIC one of p50, p90, p99,
// p999, max, mean (VALUE a duration: 10ms, 1.5s, 500us) or errors (VALUE a percentage: 0.1%).
func ParseSLO(s string) (SLO, error) {
	slo := SLO{text: s}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		name, value, ok := strings.Cut(part, "<")
		if !ok || name == "" {
			return SLO{}, fmt.Errorf("%q: want METRIC<VALUE, e.g. p99<10ms or errors<0.1%%", part)
		}
		t := sloTerm{metric: strings.TrimSpace(name)}
		if v, eq := strings.CutPrefix(value, "="); eq {
			t.orEq, value = true, v
		}
		value = strings.TrimSpace(value)
		switch t.metric {
		case "p50", "p90", "p99", "p999", "max", "mean":
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return SLO{}, fmt.Errorf("%q: %s needs a duration > 0 (10ms, 1.5s), got %q", part, t.metric, value)
			}
			t.value = float64(d) / float64(time.Millisecond)
		case "errors":
			pct, ok := strings.CutSuffix(value, "%")
			v, err := strconv.ParseFloat(pct, 64)
			if !ok || err != nil || !(v >= 0 && v <= 100) {
				return SLO{}, fmt.Errorf("%q: errors needs a percentage 0%%..100%%, got %q", part, value)
			}
			t.value = v / 100
		default:
			return SLO{}, fmt.Errorf("%q: unknown metric %q (p50, p90, p99, p999, max, mean, errors)", part, t.metric)
		}
		slo.terms = append(slo.terms, t)
	}
	if len(slo.terms) == 0 {
		return SLO{}, errors.New("no goal")
	}
	return slo, nil
}

func (s SLO) String() string { return s.text }

// Check says whether r meets every goal; when not, why (the first goal it broke).
func (s SLO) Check(r *Result) (met bool, why string) {
	if r.NotSent > 0 {
		return false, fmt.Sprintf("not_sent %d: the generator could not offer the rate", r.NotSent)
	}
	if r.Requests == 0 {
		return false, "no request was sent"
	}
	for _, t := range s.terms {
		var got float64
		unit := "ms"
		switch t.metric {
		case "p50":
			got = r.Latency.P50
		case "p90":
			got = r.Latency.P90
		case "p99":
			got = r.Latency.P99
		case "p999":
			got = r.Latency.P999
		case "max":
			got = r.Latency.Max
		case "mean":
			got = r.Latency.Mean
		case "errors":
			got, unit = float64(r.NonOK()+r.Errors)/float64(r.Requests), ""
		}
		if got < t.value || t.orEq && got == t.value {
			continue
		}
		op := "<"
		if t.orEq {
			op = "<="
		}
		if unit == "" {
			return false, fmt.Sprintf("errors %.3g%%, goal %s%.3g%%", 100*got, op, 100*t.value)
		}
		return false, fmt.Sprintf("%s %.3f ms, goal %s%g ms", t.metric, got, op, t.value)
	}
	return true, ""
}
