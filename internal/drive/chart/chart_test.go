package chart

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	c := Chart{Title: "Throughput vs connections", XLabel: "connections", YLabel: "throughput (2xx answers/s)",
		Series: []Series{
			{Name: "nsq", X: []float64{1, 2, 4}, Y: []float64{100, 180, 300}},
			{Name: "stomp", Group: 1, X: []float64{1, 2, 4}, Y: []float64{90, 150, 200}},
		}}
	lat := Chart{Title: "Latency", XLabel: "rate (requests/s)", YLabel: "latency (ms)", LogX: true, LogY: true,
		Series: []Series{{Name: "nsq p50", X: []float64{10, 1000}, Y: []float64{0, 12}}, {Name: "nsq p99", Dash: 2, X: []float64{10, 1000}, Y: []float64{3, 90}}}}
	for _, ch := range []struct {
		base string
		c    Chart
	}{{"throughput", c}, {"latency", lat}} {
		paths, err := Write(dir, ch.base, ch.c)
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != 2 {
			t.Fatalf("paths %v", paths)
		}
		png, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(paths[0], ".png") || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 5000 {
			t.Errorf("%s: not a PNG with a picture (%d bytes)", paths[0], len(png))
		}
		svg, err := os.ReadFile(paths[1])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(paths[1], ".svg") || !bytes.Contains(svg[:min(len(svg), 512)], []byte("<svg")) || !bytes.Contains(svg, []byte("</svg>")) {
			t.Errorf("%s: not an SVG", paths[1])
		}
		if !bytes.Contains(svg, []byte(ch.c.Series[1].Name)) {
			t.Errorf("%s: no legend entry %q", paths[1], ch.c.Series[1].Name)
		}
	}
}

func TestWriteRefusesBadCharts(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]Chart{
		"no series":        {Title: "t"},
		"x and y unequal":  {Title: "t", Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1}}}},
		"series no points": {Title: "t", Series: []Series{{Name: "a"}}},
	} {
		if _, err := Write(dir, "x", c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRoundTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		want   []string
	}{
		{0, 2700, []string{"0", "500", "1000", "1500", "2000", "2500"}},
		{0, 1, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{0, 93, []string{"0", "20", "40", "60", "80"}},
		{5, 5, []string{"5"}},
	}
	for _, c := range cases {
		var got []string
		for _, tk := range (roundTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%v..%v: %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}
