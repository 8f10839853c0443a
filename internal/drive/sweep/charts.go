package sweep

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mqtarget/mqtarget/internal/drive/chart"
	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// dim is one axis of a run as charts see it: its name for labels and its value.
type dim struct {
	name string
	get  func(r *load.Result) string
}

var (
	dimEndpoint = dim{"endpoint", func(r *load.Result) string { return r.Meta.Endpoint }}
	dimBroker   = dim{"broker", func(r *load.Result) string { return r.Meta.Broker }}
	dimLoad     = dim{"load", func(r *load.Result) string {
		if r.Meta.Model == load.Open {
			return Rate{r.Meta.Rate, r.Meta.RateTo}.String() + " req/s"
		}
		return strconv.Itoa(r.Meta.Connections) + " conn"
	}}
	dimSize   = dim{"size", func(r *load.Result) string { return param(r, "size", " B") }}
	dimTopics = dim{"topics", func(r *load.Result) string {
		if r.Meta.Parameters["topics"] == "1" {
			return "1 topic"
		}
		return param(r, "topics", " topics")
	}}
	dimDuration = dim{"duration", func(r *load.Result) string { return r.Meta.Duration + " runs" }}
)

func param(r *load.Result, key, unit string) string {
	if v := r.Meta.Parameters[key]; v != "" {
		return v + unit
	}
	return ""
}

// xAxis is a chart's x: which runs it plots, their x value, and the dims that stay fixed along a line.
type xAxis struct {
	file, label string
	take        func(r *load.Result) (float64, bool)
	others      []dim // what tells the lines apart, if it varies
	latency     bool  // also draw latency percentiles against it
	latencyFrom string
}

var xAxes = []xAxis{
	{"connections", "connections (closed model)", func(r *load.Result) (float64, bool) {
		return float64(r.Meta.Connections), r.Meta.Model == load.Closed
	}, []dim{dimEndpoint, dimBroker, dimSize, dimTopics, dimDuration}, true, "from the actual send time"},
	{"rate", "offered rate (requests/s, open model)", func(r *load.Result) (float64, bool) {
		// A ramp offers no one rate: it has no place on this axis (its row in summary.md has its numbers).
		return float64(r.Meta.Rate), r.Meta.Model == load.Open && r.Meta.RateTo == 0
	}, []dim{dimEndpoint, dimBroker, dimSize, dimTopics, dimDuration}, true, "from the intended send time"},
	{"size", "payload size (bytes)", func(r *load.Result) (float64, bool) { return number(r, "size") },
		[]dim{dimEndpoint, dimBroker, dimLoad, dimTopics, dimDuration}, false, ""},
	{"topics", "topics (messages spread round-robin over N topics)", func(r *load.Result) (float64, bool) { return number(r, "topics") },
		[]dim{dimEndpoint, dimBroker, dimLoad, dimSize, dimDuration}, false, ""},
}

func number(r *load.Result, key string) (float64, bool) {
	v, err := strconv.ParseFloat(r.Meta.Parameters[key], 64)
	return v, err == nil
}

// point is a result at its x value.
type point struct {
	x float64
	r *load.Result
}

// lines groups the results x takes into lines, one per combination of the dims of others that vary
// among them: the lines' keys in order of first appearance, their points sorted by x, the values of
// the dims that stay the same (for the title) and the distinct x values (fewer than two: no chart,
// and nothing else).
func lines(x xAxis, others []dim, results []*load.Result) (order []string, byKey map[string][]point, fixed []string, xs map[float64]bool) {
	var pts []point
	xs = map[float64]bool{}
	for _, r := range results {
		if v, ok := x.take(r); ok {
			pts = append(pts, point{v, r})
			xs[v] = true
		}
	}
	if len(xs) < 2 {
		return nil, nil, nil, xs // no chart
	}
	var lineDims []dim
	for _, d := range others {
		vals := map[string]bool{}
		for _, p := range pts {
			vals[d.get(p.r)] = true
		}
		switch {
		case len(vals) > 1:
			lineDims = append(lineDims, d)
		case !vals[""]:
			fixed = append(fixed, slices.Collect(maps.Keys(vals))[0])
		}
	}
	byKey = map[string][]point{}
	for _, p := range pts {
		var parts []string
		for _, d := range lineDims {
			parts = append(parts, d.get(p.r))
		}
		key := strings.Join(parts, ", ")
		if _, ok := byKey[key]; !ok {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], p)
	}
	for _, ps := range byKey {
		slices.SortStableFunc(ps, func(a, b point) int { return cmp.Compare(a.x, b.x) })
	}
	return order, byKey, fixed, xs
}

// heading is a chart's title: what against x, in the sweep titled title, with what stays fixed.
func heading(title, what string, x xAxis, fixed []string) string {
	h := what + " vs " + x.file
	if title != "" {
		h = title + ": " + strings.ToLower(h)
	}
	if len(fixed) > 0 {
		h += " (" + strings.Join(fixed, ", ") + ")"
	}
	return h
}

// lineName is a line's legend: its key, or "all runs" when nothing tells lines apart.
func lineName(key string) string {
	if key == "" {
		return "all runs"
	}
	return key
}

// writeCharts draws, for every x axis of axes with at least two values among the results, throughput
// against it (and for connections and rate, latency percentiles), one line per combination of the
// other axes. It returns the charts' base names.
func writeCharts(dir, title string, results []*load.Result, axes []xAxis) ([]string, error) {
	var names []string
	for _, x := range axes {
		order, byKey, fixed, xs := lines(x, x.others, results)
		if len(xs) < 2 {
			continue
		}
		tp := chart.Chart{Title: heading(title, "Throughput", x, fixed), XLabel: x.label, YLabel: "throughput (2xx answers/s)", LogX: logWorthy(xs)}
		lat := chart.Chart{Title: heading(title, "Latency percentiles", x, fixed), XLabel: x.label + "; latency " + x.latencyFrom,
			YLabel: "latency (ms, log scale)", LogX: tp.LogX, LogY: true}
		for g, key := range order {
			ps := byKey[key]
			name := lineName(key)
			X := make([]float64, len(ps))
			Y := make([][]float64, 5)
			for i, p := range ps {
				X[i] = p.x
				l := p.r.Latency
				for j, v := range []float64{p.r.Throughput, l.P50, l.P90, l.P99, l.P999} {
					Y[j] = append(Y[j], v)
				}
			}
			tp.Series = append(tp.Series, chart.Series{Name: name, Group: g, X: X, Y: Y[0]})
			for j, pct := range []string{"p50", "p90", "p99", "p99.9"} {
				lat.Series = append(lat.Series, chart.Series{Name: name + " " + pct, Group: g, Dash: j, X: X, Y: Y[j+1]})
			}
		}
		if x.file == "rate" {
			// What was asked for, beside what came back: where a line leaves it, the target (or the
			// generator, see not_sent) could not keep up.
			offered := slices.Sorted(maps.Keys(xs))
			tp.Series = append(tp.Series, chart.Series{Name: "offered rate", Group: offeredGroup, Dash: 2, X: offered, Y: offered})
		}
		base := "throughput-vs-" + x.file
		if _, err := chart.Write(dir, base, tp); err != nil {
			return names, err
		}
		names = append(names, base)
		if x.latency {
			base = "latency-vs-" + x.file
			if _, err := chart.Write(dir, base, lat); err != nil {
				return names, err
			}
			names = append(names, base)
		}
	}
	return names, nil
}

// axis is the x axis named file.
func axis(file string) xAxis {
	i := slices.IndexFunc(xAxes, func(x xAxis) bool { return x.file == file })
	return xAxes[i]
}

// writeFindCharts draws a find_max sweep: its steps' throughput and latency percentiles against the
// rate, one line per point, and each point's max rate against size and topics (those that vary), one
// line per combination of the other axes.
func writeFindCharts(dir, title string, searches []*load.FindResult) ([]string, error) {
	var steps, firsts []*load.Result
	maxRate := map[*load.Result]int{}
	for _, fr := range searches {
		for _, st := range fr.Steps {
			steps = append(steps, st.Result)
		}
		first := fr.Steps[0].Result // a point's dims, which every step shares
		firsts = append(firsts, first)
		maxRate[first] = fr.MaxRate
	}
	names, err := writeCharts(dir, title, steps, []xAxis{axis("rate")})
	if err != nil || len(searches) == 0 {
		return names, err
	}
	for _, x := range []xAxis{axis("size"), axis("topics")} {
		// The load is the search's, not a dim of the point.
		others := slices.DeleteFunc(slices.Clone(x.others), func(d dim) bool { return d.name == dimLoad.name })
		order, byKey, fixed, xs := lines(x, others, firsts)
		if len(xs) < 2 {
			continue
		}
		c := chart.Chart{Title: heading(title, "Max rate", x, fixed) + ", goal " + searches[0].SLO, XLabel: x.label,
			YLabel: "highest rate meeting the goal (requests/s)", LogX: logWorthy(xs)}
		for g, key := range order {
			s := chart.Series{Name: lineName(key), Group: g}
			for _, p := range byKey[key] {
				s.X = append(s.X, p.x)
				s.Y = append(s.Y, float64(maxRate[p.r]))
			}
			c.Series = append(c.Series, s)
		}
		base := "max-rate-vs-" + x.file
		if _, err := chart.Write(dir, base, c); err != nil {
			return names, err
		}
		names = append(names, base)
	}
	return names, nil
}

// offeredGroup draws the offered rate in black (the charts' palette's last colour).
const offeredGroup = 6

// logWorthy: values spanning two orders of magnitude read better on a log axis.
func logWorthy(xs map[float64]bool) bool {
	lo, hi := 0.0, 0.0
	for x := range xs {
		if lo == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	return lo > 0 && hi/lo >= 50
}
