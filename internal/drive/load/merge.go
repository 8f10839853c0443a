package load

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Merge combines the results of one load sent by several processes or machines (the shards of a run,
// or runs of the same model against the same URL) into one result: requests, answers by status,
// errors and not_sent are the sums, the percentiles come from the merged histograms (as exact as each
// run's own, see Histogram), and the duration spans the earliest start to the latest end. Shards must
// all be there, each once. Each result is checked first (its counts must add up), so a truncated or
// edited file is refused rather than merged into wrong totals; errors name the result by names[i]
// (nil: "result N", from 1).
func Merge(rs []*Result, names []string) (*Result, error) {
	if len(rs) == 0 {
		return nil, errors.New("no result to merge")
	}
	if names == nil {
		for i := range rs {
			names = append(names, fmt.Sprintf("result %d", i+1))
		}
	}
	if err := checkShards(rs, names); err != nil {
		return nil, err
	}
	first := rs[0]
	m := &Result{ByStatus: map[string]int64{}, Meta: first.Meta}
	m.Meta.Shard, m.Meta.Shards = "", nil
	var lat, svc, lag, warm histogram
	var warmPhase *Phase
	for i, r := range rs {
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		switch {
		case r.Meta.Model != first.Meta.Model:
			return nil, fmt.Errorf("%s: the %s model, %s the %s model", names[i], r.Meta.Model, names[0], first.Meta.Model)
		case r.Meta.URL != first.Meta.URL || r.Meta.Method != first.Meta.Method:
			return nil, fmt.Errorf("%s: %s %s, %s %s %s: not one load", names[i], r.Meta.Method, r.Meta.URL, names[0], first.Meta.Method, first.Meta.URL)
		}
		if err := lat.merge(r.Histograms.Latency); err != nil {
			return nil, fmt.Errorf("%s: latency: %w", names[i], err)
		}
		if r.Meta.Model == Open {
			if err := svc.merge(r.Histograms.Service); err != nil {
				return nil, fmt.Errorf("%s: service: %w", names[i], err)
			}
			if err := lag.merge(r.Histograms.Lag); err != nil {
				return nil, fmt.Errorf("%s: lag: %w", names[i], err)
			}
		}
		if r.Warmup != nil {
			if warmPhase == nil {
				warmPhase = &Phase{ByStatus: map[string]int64{}}
			}
			if err := warm.merge(r.Warmup.Histogram); err != nil {
				return nil, fmt.Errorf("%s: warm-up: %w", names[i], err)
			}
			warmPhase.Requests += r.Warmup.Requests
			warmPhase.OK += r.Warmup.OK
			warmPhase.Errors += r.Warmup.Errors
			warmPhase.DurationS = max(warmPhase.DurationS, r.Warmup.DurationS)
			addCounts(warmPhase.ByStatus, r.Warmup.ByStatus)
		}
		m.Requests += r.Requests
		m.OK += r.OK
		m.Errors += r.Errors
		m.NotSent += r.NotSent
		addCounts(m.ByStatus, r.ByStatus)
		mergeKinds(m, r.ErrorKinds)
		mergeBodies(m, r.ErrorBodies)
		if r.Meta.Shard != "" {
			m.Meta.Shards = append(m.Meta.Shards, r.Meta.Shard)
		} else if i > 0 { // independent runs: together they offered the sum
			m.Meta.Rate += r.Meta.Rate
			m.Meta.RateTo += r.Meta.RateTo
			m.Meta.Connections += r.Meta.Connections
		}
		if r.Meta.Start.Before(m.Meta.Start) {
			m.Meta.Start = r.Meta.Start
		}
		if r.Meta.End.After(m.Meta.End) {
			m.Meta.End = r.Meta.End
		}
		m.Meta.Interrupted = m.Meta.Interrupted || r.Meta.Interrupted
	}
	if d := m.Meta.End.Sub(m.Meta.Start); d > 0 {
		m.DurationS = d.Seconds()
		m.Throughput = float64(m.OK) / m.DurationS
	}
	m.Latency, m.Histograms.Latency = lat.latency(), lat.export()
	if first.Meta.Model == Open {
		s, l := svc.latency(), lag.latency()
		m.Service, m.Lag = &s, &l
		m.Histograms.Service, m.Histograms.Lag = svc.export(), lag.export()
	}
	if warmPhase != nil {
		warmPhase.Latency, warmPhase.Histogram = warm.latency(), warm.export()
		m.Warmup = warmPhase
	}
	return m, nil
}

// check reports a result whose counts do not add up: answers by status and transport errors make the
// requests, and every answer (not the errors) is in the latency histogram.
func (r *Result) check() error {
	var answered, ok int64
	for code, n := range r.ByStatus {
		c, err := strconv.Atoi(code)
		if err != nil || c < 100 || c > 999 || n < 0 {
			return fmt.Errorf("by_status %q: %d", code, n)
		}
		answered += n
		if ok2xx(c) {
			ok += n
		}
	}
	switch {
	case r.Requests < 0 || r.OK < 0 || r.Errors < 0 || r.NotSent < 0:
		return errors.New("a negative count")
	case r.Requests > maxCount || r.NotSent > maxCount:
		return fmt.Errorf("counts beyond %d", int64(maxCount))
	case answered+r.Errors != r.Requests:
		return fmt.Errorf("by_status (%d) and errors (%d) do not add up to requests (%d)", answered, r.Errors, r.Requests)
	case ok != r.OK:
		return fmt.Errorf("the 2xx of by_status (%d) are not ok (%d)", ok, r.OK)
	case r.Histograms.Latency == nil:
		return errors.New("no histograms (written by an older mqtarget load?)")
	case r.Histograms.Latency.Count != answered:
		return fmt.Errorf("the latency histogram holds %d answers, by_status %d", r.Histograms.Latency.Count, answered)
	case r.Meta.Start.IsZero() || r.Meta.End.Before(r.Meta.Start):
		return errors.New("meta: start and end missing or out of order")
	}
	return nil
}

// maxCount bounds a result's counts, so the sums of up to MaxShards results cannot overflow.
const maxCount = 1 << 50

// checkShards: results that are shards must all be, of one N, each index once and none missing.
func checkShards(rs []*Result, names []string) error {
	var n int
	seen := map[int]bool{}
	for i, r := range rs {
		if r.Meta.Shard == "" {
			if n > 0 {
				return fmt.Errorf("%s is no shard, %s is shard %s", names[i], names[0], rs[0].Meta.Shard)
			}
			continue
		}
		idx, total, err := ParseShard(r.Meta.Shard)
		if err != nil {
			return fmt.Errorf("%s: meta.shard: %w", names[i], err)
		}
		switch {
		case i > 0 && n == 0:
			return fmt.Errorf("%s is shard %s, %s is no shard", names[i], r.Meta.Shard, names[0])
		case n != 0 && total != n:
			return fmt.Errorf("%s is shard %s, %s one of %d shards", names[i], r.Meta.Shard, names[0], n)
		case seen[idx]:
			return fmt.Errorf("%s: shard %s given twice", names[i], r.Meta.Shard)
		}
		n, seen[idx] = total, true
	}
	for i := range n {
		if !seen[i] {
			return fmt.Errorf("shard %d/%d missing (%d of %d given)", i, n, len(seen), n)
		}
	}
	return nil
}

// ParseShard parses "I/N" with 0 <= I < N <= MaxShards.
func ParseShard(s string) (shard, shards int, err error) {
	a, b, ok := strings.Cut(s, "/")
	shard, err1 := strconv.Atoi(a)
	shards, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || shard < 0 || shards < 1 || shard >= shards || shards > MaxShards {
		return 0, 0, fmt.Errorf("%q: want I/N with 0 <= I < N <= %d (I from 0, as JOB_COMPLETION_INDEX)", s, MaxShards)
	}
	return shard, shards, nil
}

func addCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

func mergeKinds(m *Result, kinds map[string]int64) {
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		if m.ErrorKinds == nil {
			m.ErrorKinds = map[string]int64{}
		}
		if _, ok := m.ErrorKinds[k]; ok || len(m.ErrorKinds) < maxErrorKinds {
			m.ErrorKinds[k] += kinds[k]
		} else {
			m.ErrorKinds["(other)"] += kinds[k]
		}
	}
}

func mergeBodies(m *Result, bodies map[string][]string) {
	for _, code := range slices.Sorted(maps.Keys(bodies)) {
		if m.ErrorBodies == nil {
			m.ErrorBodies = map[string][]string{}
		}
		have, ok := m.ErrorBodies[code]
		if !ok && len(m.ErrorBodies) >= maxSampledStatuses {
			continue
		}
		for _, b := range bodies[code] {
			if len(have) < samplesPerStatus && !slices.Contains(have, b) {
				have = append(have, oneLine(b))
			}
		}
		m.ErrorBodies[code] = have
	}
}
