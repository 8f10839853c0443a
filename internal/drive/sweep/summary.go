package sweep

import (
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// writeSummary writes summary.md: what ran where, a table of the runs and the charts.
// With find_max, a table of the searches (each point's max rate) comes first, and the runs are their
// steps.
func writeSummary(dir string, spec Spec, base string, o Options, out *Outcome, charts []string) error {
	results := out.Results
	var b strings.Builder
	title := spec.Title
	if title == "" {
		title = "mqtarget sweep"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	target := "not a mqtarget (or it did not say)"
	if t := o.Target; t != nil {
		target = fmt.Sprintf("mqtarget %s (revision %s, %s), default broker %s", t.Version, t.Revision, t.GoVersion, t.DefaultBroker)
	}
	when := "no run finished"
	if len(results) > 0 {
		when = results[0].Meta.Start.Format(time.RFC3339) + " to " + results[len(results)-1].Meta.End.Format(time.RFC3339)
	}
	fmt.Fprintf(&b, "- target: `%s`, %s\n- load generator: mqtarget %s on %d cores (GOMAXPROCS %d)\n- when: %s\n",
		base, target, o.Version, runtime.NumCPU(), runtime.GOMAXPROCS(0), when)
	if f := spec.FindMax; f != nil {
		fmt.Fprintf(&b, "- find_max: %d searches of %d, each from %d req/s by %d up to %d, goal `%s`; %d runs, method %s (spec: `%s`)\n",
			len(out.Searches), len(spec.Runs()), f.Rate, f.Step, f.MaxRate, f.SLO, len(results), spec.Method, SpecCopy)
	} else {
		fmt.Fprintf(&b, "- runs: %d of %d, method %s (spec: `%s`)\n", len(results), len(spec.Runs()), spec.Method, SpecCopy)
	}
	versions := map[string]string{}
	for _, r := range results {
		if r.Meta.BrokerVersion != "" {
			versions[r.Meta.Broker] = r.Meta.BrokerVersion
		}
	}
	for _, name := range slices.Sorted(maps.Keys(versions)) {
		fmt.Fprintf(&b, "- broker %s: %s\n", name, versions[name])
	}
	b.WriteString("\n")
	b.WriteString("Throughput counts 2xx answers only. Latency is over every answer; in the open model (rate) it counts\n" +
		"from each request's intended send time, so stalls are not hidden; in the closed model (connections) from\n" +
		"the actual send time, as wrk does. In the open model results.json and results.csv also have the service\n" +
		"time (from the actual send, what wrk, hey and vegeta show) and the generator's lag (intended → actual).\n\n")
	if spec.FindMax != nil {
		writeSearches(&b, out.Searches)
	}
	for _, c := range charts {
		fmt.Fprintf(&b, "![%s](%s.png)\n\n", c, c)
	}
	goal := func(*load.Result) string { return "" }
	if spec.FindMax != nil {
		b.WriteString("Every step of every search, with its verdict:\n\n| goal ")
		verdict := map[*load.Result]string{}
		for _, fr := range out.Searches {
			for _, st := range fr.Steps {
				verdict[st.Result] = st.Verdict()
			}
		}
		goal = func(r *load.Result) string { return "| " + verdict[r] + " " }
	}
	b.WriteString("| endpoint | broker | load | size | topics | duration | requests | 2xx | non-2xx | errors | 2xx/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |\n")
	if spec.FindMax != nil {
		b.WriteString("|---")
	}
	b.WriteString("|---|---|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		l := r.Latency
		fmt.Fprintf(&b, "%s| %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
			goal(r), r.Meta.Endpoint, r.Meta.Broker, dimLoad.get(r), dash(r.Meta.Parameters["size"]), dash(r.Meta.Parameters["topics"]),
			r.Meta.Duration, r.Requests, r.OK, r.NonOK(), r.Errors, r.Throughput, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	var bad []string
	for _, r := range results {
		var what []string
		if r.NonOK() > 0 {
			what = append(what, "answers by status "+r.StatusList())
		}
		if r.Errors > 0 {
			what = append(what, fmt.Sprintf("%d without an answer %v", r.Errors, r.ErrorKinds))
		}
		if r.NotSent > 0 {
			what = append(what, fmt.Sprintf("%d due and never sent (the generator fell behind)", r.NotSent))
		}
		if r.Lag != nil && r.Service != nil && r.Lag.P99 > lagNote {
			what = append(what, fmt.Sprintf("the generator sent late: lag p99 %.2f ms is in the latency (service p99 %.2f ms)",
				r.Lag.P99, r.Service.P99))
		}
		if len(what) > 0 {
			// the point's every parameter: two runs of a sweep over sizes or topics differ only there
			who := []string{r.Meta.Endpoint, r.Meta.Broker, dimLoad.get(r)}
			for _, k := range []string{"size", "topics"} {
				if v := r.Meta.Parameters[k]; v != "" {
					who = append(who, k+"="+v)
				}
			}
			who = slices.DeleteFunc(append(who, r.Meta.Duration), func(s string) bool { return s == "" })
			bad = append(bad, fmt.Sprintf("- %s: %s", strings.Join(who, " "), strings.Join(what, "; ")))
		}
	}
	if len(bad) > 0 {
		b.WriteString("\nRuns with answers other than 2xx (not counted as throughput), errors, requests not sent or sent late:\n\n" +
			strings.Join(bad, "\n") + "\n")
	}
	return writeFile(filepath.Join(dir, Summary), []byte(b.String()))
}

// writeSearches is summary.md's table of a find_max sweep's searches: each point's max rate, where it
// broke, and what the run at the max rate measured.
func writeSearches(b *strings.Builder, searches []*load.FindResult) {
	b.WriteString("Each point's search runs its rates one after another until a step breaks the goal (or its\n" +
		"generator fell behind: not_sent); max rate is the highest rate whose step met it (0: not even the first).\n\n")
	b.WriteString("| endpoint | broker | size | topics | duration | max rate/s | steps | broke at | 2xx/s at max | p50 ms | p99 ms | p99.9 ms |\n")
	b.WriteString("|---|---|---|---|---|--:|--:|---|--:|--:|--:|--:|\n")
	for _, fr := range searches {
		r := fr.Steps[0].Result
		broke := fr.Broke
		if broke == "" {
			broke = "not broken (the last step; higher was not tried)"
		}
		at := "| - | - | - | - |"
		if i := slices.IndexFunc(fr.Steps, func(s load.FindStep) bool { return s.Met && s.Rate == fr.MaxRate }); i >= 0 {
			m := fr.Steps[i].Result
			at = fmt.Sprintf("| %.0f | %.2f | %.2f | %.2f |", m.Throughput, m.Latency.P50, m.Latency.P99, m.Latency.P999)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d | %d | %s %s\n", r.Meta.Endpoint, r.Meta.Broker, dash(r.Meta.Parameters["size"]),
			dash(r.Meta.Parameters["topics"]), r.Meta.Duration, fr.MaxRate, len(fr.Steps), broke, at)
	}
	b.WriteString("\n")
}

// lagNote is the generator lag p99 above which summary.md says the open model's latency includes it.
const lagNote = 1.0 // ms

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
