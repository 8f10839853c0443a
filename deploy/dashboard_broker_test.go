package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardByBroker: the dashboard shows each broker apart, whichever of them a deployment uses:
// a multi-value "broker" variable over a metric with the broker label, and every query of a metric
// whose series carry that label (in a real scrape) filters by broker=~"$broker" and keeps the brokers
// apart: every aggregation groups by broker and the legend names {{broker}}, or the panel (a heatmap,
// which has no legend) is repeated per broker.
func TestDashboardByBroker(t *testing.T) {
	samples, _ := scrape(t)
	byBroker := map[string]bool{}
	for name, labels := range samples {
		if labels["broker"] {
			byBroker[metricBase(name)] = true
		}
	}
	if len(byBroker) < 4 {
		t.Fatalf("only %d metrics carry the broker label: %v", len(byBroker), byBroker)
	}
	type target struct {
		Expr   string `json:"expr"`
		Legend string `json:"legendFormat"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Repeat  string   `json:"repeat"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Multi      bool   `json:"multi"`
				IncludeAll bool   `json:"includeAll"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	data, err := os.ReadFile("grafana/mqtarget-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	variable := false
	for _, v := range d.Templating.List {
		if v.Name != "broker" {
			continue
		}
		variable = true
		m := metricRE.FindString(v.Definition)
		if v.Type != "query" || !v.Multi || !v.IncludeAll || !strings.HasPrefix(v.Definition, "label_values(") ||
			!strings.HasSuffix(v.Definition, ", broker)") || !byBroker[metricBase(m)] {
			t.Errorf("variable broker: type %q multi %v all %v %q, want a multi-value query of label_values(<a metric with the broker label>, broker)",
				v.Type, v.Multi, v.IncludeAll, v.Definition)
		}
	}
	if !variable {
		t.Error("no broker variable")
	}
	checked := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				brokered := false
				for _, m := range metricRE.FindAllString(tg.Expr, -1) {
					brokered = brokered || byBroker[metricBase(m)]
				}
				if !brokered {
					continue
				}
				checked++
				if !strings.Contains(tg.Expr, `broker=~"$broker"`) {
					t.Errorf("panel %q: %s does not filter by the broker variable", p.Title, tg.Expr)
				}
				if p.Repeat == "broker" {
					continue // one panel per broker
				}
				for _, agg := range aggRE.FindAllStringSubmatch(tg.Expr, -1) {
					if !strings.Contains(agg[2], "broker") {
						t.Errorf("panel %q: %q in %s adds the brokers together (group by broker, or repeat the panel per broker)", p.Title, agg[0], tg.Expr)
					}
				}
				if !strings.Contains(tg.Legend, "{{broker}}") {
					t.Errorf("panel %q: legend %q does not name the broker", p.Title, tg.Legend)
				}
			}
		}
	}
	walk(d.Panels)
	if checked < 5 {
		t.Errorf("only %d panel queries read metrics with the broker label", checked)
	}
}

var (
	metricRE = regexp.MustCompile(`\bmqtarget_[a-z0-9_]+`)
	// aggRE matches an aggregation and its by (...) clause, if any (group 2).
	aggRE = regexp.MustCompile(`\b(sum|avg|min|max|count|topk|bottomk|quantile)\s*(by\s*\([^)]*\))?\s*\(`)
)

// metricBase is a series name without a histogram's _bucket, _sum or _count.
func metricBase(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, s); ok {
			return b
		}
	}
	return name
}
