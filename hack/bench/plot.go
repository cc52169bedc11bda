package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The figures are drawn with gonum.org/v1/plot: grouped bar charts on a linear or logarithmic
// Y axis, and line charts, one panel per concurrency or Database count, stacked in one PNG.

var (
	grey = color.RGBA{120, 120, 120, 255}
	red  = color.RGBA{200, 40, 40, 255}

	targetColors = map[string]color.RGBA{
		"ours-json":   {66, 133, 244, 255},
		"ours-proto":  {15, 157, 88, 255},
		"ours-direct": {171, 71, 188, 255},
		"crd":         {240, 140, 0, 255},
	}
)

// dpi is the resolution of the PNGs; px converts pixels at that resolution to a length.
const dpi = 96

func px(n int) vg.Length { return vg.Length(n) * vg.Inch / dpi }

// series is one bar per category, in one color.
type series struct {
	name   string
	color  color.Color
	values []float64 // NaN: no bar
}

// refLine is a dashed horizontal line across the plot, in the legend as label.
type refLine struct {
	value float64
	label string
}

type barChart struct {
	title, ylabel string
	categories    []string
	series        []series
	log           bool
	refs          []refLine
	// labelFmt, if set, prints each bar's value above it.
	labelFmt string
	// ticks, if set, are the values labelled on the Y axis (by default: every power of ten on a
	// log scale).
	ticks []float64
}

// groupWidth is the share of each category's slot the bars of its group fill.
const groupWidth = 0.8

// bars draws one series of a grouped bar chart: the index-th of of bars in each category's slot,
// from the bottom of the Y axis (plotter.BarChart draws from 0, which a log scale cannot show).
type bars struct {
	series
	index, of int
}

// span returns the X interval, in data units, of the bar of category i.
func (b *bars) span(i int) (x0, x1 float64) {
	w := groupWidth / float64(b.of)
	x0 = float64(i) - groupWidth/2 + float64(b.index)*w
	return x0, x0 + w
}

// drawable reports whether v has a bar: a number, and positive on a log scale.
func drawable(v float64, log bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
}

// Plot implements plot.Plotter.
func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	_, log := p.Y.Scale.(plot.LogScale)
	trX, trY := p.Transforms(&c)
	for i, v := range b.values {
		if !drawable(v, log) {
			continue
		}
		x0, x1 := b.span(i)
		bottom, top := trY(p.Y.Min), trY(math.Min(v, p.Y.Max))
		c.FillPolygon(b.color, c.ClipPolygonY([]vg.Point{
			{X: trX(x0), Y: bottom}, {X: trX(x1), Y: bottom}, {X: trX(x1), Y: top}, {X: trX(x0), Y: top},
		}))
	}
}

// DataRange implements plot.DataRanger: every category's slot, and the bars' values.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	lo, hi := valueRange(b.values, false)
	return -0.5, float64(len(b.values)) - 0.5, lo, hi
}

// Thumbnail implements plot.Thumbnailer, for the legend.
func (b *bars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, c.ClipPolygonY([]vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y},
	}))
}

// labels prints each bar's value, formatted with format, above it.
func (b *bars) labels(format string, log bool) (*plotter.Labels, error) {
	var xyl plotter.XYLabels
	for i, v := range b.values {
		if !drawable(v, log) {
			continue
		}
		x0, x1 := b.span(i)
		xyl.XYs = append(xyl.XYs, plotter.XY{X: (x0 + x1) / 2, Y: v})
		xyl.Labels = append(xyl.Labels, fmt.Sprintf(format, v))
	}
	l, err := plotter.NewLabels(xyl)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font.Size = vg.Points(7)
		l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
	}
	l.Offset = vg.Point{Y: vg.Points(2)}
	return l, nil
}

// valueRange returns the smallest and largest of values that have a bar (positive ones on a log
// scale), or NaN, NaN when none has.
func valueRange(values []float64, log bool) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if drawable(v, log) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return math.NaN(), math.NaN()
	}
	return lo, hi
}

// yAxisRange is the Y axis of a chart of values: from 0 on a linear scale, from the decade at or
// below the smallest value on a log scale; with room above the largest for the legend and the
// value labels. No value gives 0 to 1 (1 to 10 on a log scale).
func yAxisRange(values []float64, log bool) (lo, hi float64) {
	lo, hi = valueRange(values, log)
	switch {
	case math.IsNaN(lo) && log:
		return 1, 10
	case math.IsNaN(lo):
		return 0, 1
	case log:
		return math.Pow(10, math.Floor(math.Log10(lo))), hi * 4
	default:
		return 0, math.Max(hi*1.35, math.SmallestNonzeroFloat64)
	}
}

// plot builds the chart.
func (bc barChart) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = bc.title
	p.Y.Label.Text = bc.ylabel
	p.NominalX(bc.categories...)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	var all []float64
	for i, s := range bc.series {
		if len(s.values) != len(bc.categories) {
			return nil, fmt.Errorf("%s: series %s has %d values for %d categories", bc.title, s.name, len(s.values), len(bc.categories))
		}
		all = append(all, s.values...)
		b := &bars{series: s, index: i, of: len(bc.series)}
		p.Add(b)
		p.Legend.Add(s.name, b)
		if bc.labelFmt != "" {
			l, err := b.labels(bc.labelFmt, bc.log)
			if err != nil {
				return nil, err
			}
			p.Add(l)
		}
	}
	for _, r := range bc.refs {
		all = append(all, r.value)
		line, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: r.value}, {X: float64(len(bc.categories)) - 0.5, Y: r.value}})
		if err != nil {
			return nil, err
		}
		line.Color, line.Width, line.Dashes = red, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(4)}
		p.Add(line)
		p.Legend.Add(r.label, line)
	}
	if bc.log {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if bc.ticks != nil {
		var ticks plot.ConstantTicks
		for _, v := range bc.ticks {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
		p.Y.Tick.Marker = ticks
	}
	p.Y.Min, p.Y.Max = yAxisRange(all, bc.log)
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}

type lineSeries struct {
	name   string
	color  color.Color
	points [][2]float64
	dashed bool
}

type lineChart struct {
	title, xlabel, ylabel string
	series                []lineSeries
}

// plot builds the chart, both axes from 0.
func (lc lineChart) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = lc.title
	p.X.Label.Text = lc.xlabel
	p.Y.Label.Text = lc.ylabel
	p.Add(plotter.NewGrid())
	var ys []float64
	for _, s := range lc.series {
		xys := make(plotter.XYs, len(s.points))
		for i, pt := range s.points {
			xys[i] = plotter.XY{X: pt[0], Y: pt[1]}
			ys = append(ys, pt[1])
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", lc.title, s.name, err)
		}
		line.Color, line.Width = s.color, vg.Points(2)
		if s.dashed {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		p.Add(line)
		p.Legend.Add(s.name, line)
	}
	p.X.Min = 0
	p.Y.Min, p.Y.Max = yAxisRange(ys, false)
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}

// savePanels writes panels stacked top to bottom, each width by height pixels, to path as a PNG.
func savePanels(path string, width, height int, panels []*plot.Plot) error {
	if len(panels) == 0 {
		return errors.New("no panels")
	}
	img := vgimg.NewWith(vgimg.UseWH(px(width), px(height*len(panels))), vgimg.UseDPI(dpi))
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: px(8), PadBottom: px(8), PadLeft: px(8), PadRight: px(16), PadY: px(24)}
	for i, c := range plot.Align(rows, tiles, draw.New(img)) {
		panels[i].Draw(c[0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// apiVerbs are the table's verbs in order, LIST by its size.
func apiVerbs(res *results) []string {
	verbs := append([]string{}, crudVerbs...)
	seen := map[string]bool{}
	for _, r := range res.Rows {
		if r.Objects > 0 && !seen[verbName(r)] {
			seen[verbName(r)] = true
			verbs = append(verbs, verbName(r))
		}
	}
	return verbs
}

func findRow(res *results, target, verb string, conc int) *row {
	for i := range res.Rows {
		r := &res.Rows[i]
		if r.Target == target && verbName(*r) == verb && r.Concurrency == conc {
			return r
		}
	}
	return nil
}

var oursTargets = []string{"ours-json", "ours-proto", "ours-direct"}
var allTargets = []string{"ours-json", "ours-proto", "ours-direct", "crd"}

func writePlots(dir string, res *results) error {
	var files []string
	save := func(name string, width, height int, charts ...chart) error {
		panels := make([]*plot.Plot, len(charts))
		for i, c := range charts {
			p, err := c.plot()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			panels[i] = p
		}
		files = append(files, name)
		return savePanels(filepath.Join(dir, name), width, height, panels)
	}
	if len(res.Rows) > 0 {
		verbs := apiVerbs(res)
		labels := make([]string, len(verbs))
		for i, v := range verbs {
			labels[i] = strings.Replace(v, "list ", "list", 1)
		}
		// Ratios ours/CRD, one panel per concurrency.
		concs := res.Meta.Scale.Concurrency
		const pw, ph = 1400, 420
		var charts []chart
		for _, conc := range concs {
			var ss []series
			for _, t := range oursTargets {
				s := series{name: t, color: targetColors[t]}
				for _, v := range verbs {
					r, crd := findRow(res, t, v, conc), findRow(res, "crd", v, conc)
					x := math.NaN()
					if r != nil && crd != nil && crd.Throughput > 0 {
						x = r.Throughput / crd.Throughput
					}
					s.values = append(s.values, x)
				}
				ss = append(ss, s)
			}
			charts = append(charts, barChart{
				title:      fmt.Sprintf("Throughput, ours / CRD, concurrency %d (log scale; above the line: ours faster)", conc),
				ylabel:     "ratio",
				categories: labels, series: ss, log: true,
				refs:     []refLine{{1, "1.0x"}},
				labelFmt: "%.2f",
				ticks:    []float64{0.25, 0.5, 1, 2, 4, 8},
			})
		}
		if err := save("throughput-ratio.png", pw, ph, charts...); err != nil {
			return err
		}

		for _, m := range []struct {
			file, title, ylabel string
			value               func(r *row) float64
		}{
			{"throughput.png", "Throughput at concurrency %d (requests/s, log scale)", "req/s", func(r *row) float64 { return r.Throughput }},
			{"latency-p50.png", "Latency p50 at concurrency %d (ms, log scale)", "ms", func(r *row) float64 { return r.Latency.P50 }},
			{"latency-p99.png", "Latency p99 at concurrency %d (ms, log scale)", "ms", func(r *row) float64 { return r.Latency.P99 }},
			{"cpu.png", "Server CPU per 1,000 requests at concurrency %d (s, log scale)", "CPU s", func(r *row) float64 { return r.ServerCPUPer1k }},
		} {
			var charts []chart
			for _, conc := range concs {
				var ss []series
				for _, t := range allTargets {
					s := series{name: t, color: targetColors[t]}
					for _, v := range verbs {
						x := math.NaN()
						if r := findRow(res, t, v, conc); r != nil {
							x = m.value(r)
						}
						s.values = append(s.values, x)
					}
					ss = append(ss, s)
				}
				charts = append(charts, barChart{title: fmt.Sprintf(m.title, conc), ylabel: m.ylabel, categories: labels, series: ss, log: true})
			}
			if err := save(m.file, pw, ph, charts...); err != nil {
				return err
			}
		}
	}

	if len(res.Watch) > 0 {
		p50 := series{name: "p50", color: color.RGBA{66, 133, 244, 255}}
		p99 := series{name: "p99", color: color.RGBA{219, 68, 55, 255}}
		var cats []string
		for _, w := range res.Watch {
			cats = append(cats, w.Target)
			p50.values = append(p50.values, w.Latency.P50)
			p99.values = append(p99.values, w.Latency.P99)
		}
		if err := save("watch.png", 900, 440, barChart{
			title:  fmt.Sprintf("Watch latency, write to event at %d watchers (ms)", res.Watch[0].Watchers),
			ylabel: "ms", categories: cats, series: []series{p50, p99}, labelFmt: "%.1f",
		}); err != nil {
			return err
		}
	}

	if m := res.Memory; m != nil {
		rss := series{name: "RSS added", color: color.RGBA{66, 133, 244, 255},
			values: []float64{m.OursDeltaMiB, m.KubeDeltaMiB}}
		heap := series{name: "Go heap added", color: color.RGBA{15, 157, 88, 255},
			values: []float64{m.OursHeapDelta, m.KubeHeapDelta}}
		total := series{name: "whole RSS after", color: color.RGBA{180, 180, 180, 255},
			values: []float64{m.OursAfter.RSSMiB, m.KubeAfter.RSSMiB}}
		if err := save("memory.png", 900, 460, barChart{
			title: fmt.Sprintf("Memory to hold %d objects (MiB)", m.Objects), ylabel: "MiB",
			categories: []string{"our server: Databases", "kube-apiserver: CRD"},
			series:     []series{rss, heap, total}, labelFmt: "%.0f",
		}); err != nil {
			return err
		}
	}

	var sizes []int
	for _, r := range res.Controller {
		if r.Kind == "controller" {
			sizes = append(sizes, r.Databases)
		}
	}
	if len(sizes) > 0 {
		var charts []chart
		for _, n := range sizes {
			var ls []lineSeries
			for _, r := range res.Controller {
				if r.Databases != n {
					continue
				}
				s := lineSeries{name: fmt.Sprintf("controller: Databases Ready (%.0f s)", r.Seconds), color: color.RGBA{15, 157, 88, 255}, points: r.Curve}
				if r.Kind == "floor" {
					s.color, s.dashed = grey, true
					s.name = fmt.Sprintf("floor: plain client (%.0f s)", r.Seconds)
				}
				ls = append(ls, s)
			}
			charts = append(charts, lineChart{title: fmt.Sprintf("%d Databases created at once: how many are Ready over time", n),
				xlabel: "seconds since the first create", ylabel: "ready", series: ls})
		}
		if err := save("controller.png", 1100, 440, charts...); err != nil {
			return err
		}
	}
	fmt.Printf("plots: %s\n", strings.Join(files, ", "))
	return nil
}

// chart is a bar or line chart, one panel of a figure.
type chart interface {
	plot() (*plot.Plot, error)
}
