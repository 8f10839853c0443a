// Package chart draws line charts of load results as PNG and SVG files with gonum/plot (pure Go, fonts
// embedded), so a sweep leaves pictures a person can read without any other tool.
package chart

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one line chart.
type Chart struct {
	Title          string
	XLabel, YLabel string // with units, e.g. "connections", "throughput (2xx/s)"
	LogX, LogY     bool
	Series         []Series
}

// Series is one line. Lines of the same Group share a colour, and Dash (0 solid, 1.. dashed patterns)
// tells apart the lines within a group (e.g. percentiles of one broker).
type Series struct {
	Name        string
	Group, Dash int
	X, Y        []float64
}

// Size of the pictures.
const (
	Width  = 9 * vg.Inch
	Height = 5.5 * vg.Inch
)

// Formats written by Write, as file extensions.
var Formats = []string{"png", "svg"}

// Write draws c into dir/base.png and dir/base.svg and returns their paths.
func Write(dir, base string, c Chart) ([]string, error) {
	p, err := c.plot()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, ext := range Formats {
		path := filepath.Join(dir, base+"."+ext)
		if err := save(p, path, ext); err != nil {
			return paths, fmt.Errorf("chart %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// save draws the plot on the left and its legend in a strip of its own on the right, so the legend
// never covers a line however many there are.
func save(p *plot.Plot, path, format string) error {
	legend := p.Legend
	p.Legend = plot.NewLegend() // p.Draw draws none
	c, err := draw.NewFormattedCanvas(Width, Height, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	r := legend.Rectangle(dc)
	lw := r.Max.X - r.Min.X + 2*legendPad
	plotArea := draw.Crop(dc, 0, -lw, 0, 0)
	p.Draw(plotArea)
	legendArea := draw.Crop(dc, Width-lw+legendPad, -legendPad, 0, -p.Title.TextStyle.Font.Size*3)
	legend.Draw(legendArea)
	p.Legend = legend
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

const legendPad = 8 * vg.Millimeter / 4

// palette is colour-blind friendly (Okabe–Ito), dark enough on white.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{0, 158, 115, 255},   // green
	color.RGBA{204, 121, 167, 255}, // purple
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{0, 0, 0, 255},
}

var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{}, draw.CrossGlyph{}, draw.RingGlyph{}}

func (c Chart) plot() (*plot.Plot, error) {
	if len(c.Series) == 0 {
		return nil, errors.New("chart " + strconv.Quote(c.Title) + ": no series")
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(10)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	minY, maxY := math.Inf(1), math.Inf(-1)
	minX, maxX := math.Inf(1), math.Inf(-1)
	var allX []float64
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) || len(s.X) == 0 {
			return nil, fmt.Errorf("chart %q: series %q has %d x and %d y values", c.Title, s.Name, len(s.X), len(s.Y))
		}
		xys := make(plotter.XYs, len(s.X))
		for i := range s.X {
			xys[i].X, xys[i].Y = s.X[i], s.Y[i]
			if c.LogY && xys[i].Y <= 0 {
				xys[i].Y = 1e-3 // a log axis has no 0; a microsecond stands for it
			}
			minY, maxY = math.Min(minY, xys[i].Y), math.Max(maxY, xys[i].Y)
			minX, maxX = math.Min(minX, xys[i].X), math.Max(maxX, xys[i].X)
			allX = append(allX, xys[i].X)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("chart %q: series %q: %w", c.Title, s.Name, err)
		}
		col := palette[s.Group%len(palette)]
		line.Color, line.Width, line.Dashes = col, vg.Points(2), dashes[s.Dash%len(dashes)]
		points.Color, points.Shape, points.Radius = col, glyphs[s.Group%len(glyphs)], vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(s.Name, line, points)
	}
	if c.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		lo, hi := math.Log10(minY), math.Log10(maxY)
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(lo)), math.Pow(10, math.Ceil(hi+0.05))
	} else {
		p.Y.Min, p.Y.Max = 0, maxY*1.08
		if p.Y.Max == 0 {
			p.Y.Max = 1
		}
		p.Y.Tick.Marker = roundTicks{}
	}
	if c.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = minX/1.15, maxX*1.15
	} else {
		pad := (maxX - minX) * 0.04
		if pad == 0 {
			pad = 1
		}
		p.X.Min, p.X.Max = minX-pad, maxX+pad
	}
	p.X.Tick.Marker = xTicks(allX, p.X.Tick.Marker)
	if c.LogX {
		if _, constant := p.X.Tick.Marker.(plot.ConstantTicks); !constant {
			p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		}
	}
	return p, nil
}

// xTicks labels the x axis at the data's own x values (a sweep's axis values) when they are few
// enough to read, else at round numbers.
func xTicks(xs []float64, fallback plot.Ticker) plot.Ticker {
	slices.Sort(xs)
	xs = slices.Compact(xs)
	if len(xs) > 12 {
		return fallback
	}
	ticks := make(plot.ConstantTicks, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)}
	}
	return ticks
}

// roundTicks labels a linear axis at 4 to 10 round values (1, 2 or 5 times a power of ten apart),
// written without needless decimals; gonum's default can leave a tall axis with two labels.
type roundTicks struct{}

func (roundTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	raw := (hi - lo) / 6
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow
	for _, m := range []float64{2, 5, 10} {
		if step >= raw {
			break
		}
		step = m * pow
	}
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
		// Half-way minor ticks.
		if m := v + step/2; m <= hi {
			ticks = append(ticks, plot.Tick{Value: m})
		}
	}
	return ticks
}
