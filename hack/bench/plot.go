package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Plots are drawn by hand on an image.RGBA with the 5×7 font of font.go: bar charts (linear or
// logarithmic) and line charts, enough for the benchmark's figures without a dependency.

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{30, 30, 30, 255}
	grey      = color.RGBA{120, 120, 120, 255}
	lightGrey = color.RGBA{225, 225, 225, 255}
	red       = color.RGBA{200, 40, 40, 255}

	targetColors = map[string]color.RGBA{
		"ours-json":   {66, 133, 244, 255},
		"ours-proto":  {15, 157, 88, 255},
		"ours-direct": {171, 71, 188, 255},
		"crd":         {240, 140, 0, 255},
	}
)

type canvas struct{ img *image.RGBA }

func newCanvas(w, h int) *canvas {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	c.fill(0, 0, w, h, white)
	return c
}

func (c *canvas) set(x, y int, col color.RGBA) {
	if image.Pt(x, y).In(c.img.Rect) {
		c.img.SetRGBA(x, y, col)
	}
}

func (c *canvas) fill(x0, y0, x1, y1 int, col color.RGBA) {
	if x0 > x1 {
		x0, x1 = x1, x0
	}
	if y0 > y1 {
		y0, y1 = y1, y0
	}
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			c.set(x, y, col)
		}
	}
}

// line draws from (x0,y0) to (x1,y1), width pixels thick; dash > 0 draws dash-pixel dashes.
func (c *canvas) line(x0, y0, x1, y1 int, col color.RGBA, width, dash int) {
	dx, dy := math.Abs(float64(x1-x0)), math.Abs(float64(y1-y0))
	steps := int(math.Max(dx, dy))
	if steps == 0 {
		steps = 1
	}
	for i := 0; i <= steps; i++ {
		if dash > 0 && (i/dash)%2 == 1 {
			continue
		}
		x := x0 + int(math.Round(float64(x1-x0)*float64(i)/float64(steps)))
		y := y0 + int(math.Round(float64(y1-y0)*float64(i)/float64(steps)))
		for w := 0; w < width; w++ {
			for v := 0; v < width; v++ {
				c.set(x+w-width/2, y+v-width/2, col)
			}
		}
	}
}

func textWidth(s string, scale int) int {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return 0
	}
	return (n*6 - 1) * scale
}

// text draws s with its top-left corner at (x, y).
func (c *canvas) text(x, y int, s string, scale int, col color.RGBA) {
	for _, r := range s {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row := range 7 {
			for bit := range 5 {
				if g[row]&(1<<(4-bit)) != 0 {
					c.fill(x+bit*scale, y+row*scale, x+(bit+1)*scale, y+(row+1)*scale, col)
				}
			}
		}
		x += 6 * scale
	}
}

func (c *canvas) textCentered(cx, y int, s string, scale int, col color.RGBA) {
	c.text(cx-textWidth(s, scale)/2, y, s, scale, col)
}

func (c *canvas) textRight(xr, y int, s string, scale int, col color.RGBA) {
	c.text(xr-textWidth(s, scale), y, s, scale, col)
}

// textUp draws s rotated a quarter turn counter-clockwise, centred on (cx, cy).
func (c *canvas) textUp(cx, cy int, s string, scale int, col color.RGBA) {
	w := textWidth(s, scale)
	tmp := newCanvas(w, 7*scale)
	tmp.text(0, 0, s, scale, col)
	for y := range 7 * scale {
		for x := range w {
			if tmp.img.RGBAAt(x, y) == col {
				c.set(cx-7*scale/2+y, cy+w/2-x, col)
			}
		}
	}
}

func (c *canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// axis maps values to [0, 1], linearly or on a log10 scale.
type axis struct {
	min, max float64
	log      bool
}

func newAxis(values []float64, log bool, extra ...float64) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range append(values, extra...) {
		if math.IsNaN(v) || (log && v <= 0) {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if log {
		return axis{min: math.Pow(10, math.Floor(math.Log10(lo))), max: math.Pow(10, math.Ceil(math.Log10(hi*1.05))), log: true}
	}
	step := niceStep(hi / 5)
	return axis{min: 0, max: math.Max(step, math.Ceil(hi*1.08/step)*step)}
}

func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func (a axis) frac(v float64) float64 {
	if a.log {
		if v <= 0 {
			return 0
		}
		return (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	}
	return (v - a.min) / (a.max - a.min)
}

func (a axis) ticks() []float64 {
	var t []float64
	if a.log {
		for v := a.min; v <= a.max*1.0001; v *= 10 {
			t = append(t, v)
		}
		return t
	}
	step := niceStep((a.max - a.min) / 5)
	for v := a.min; v <= a.max+step/1000; v += step {
		t = append(t, v)
	}
	return t
}

func formatNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case math.Abs(v) >= 1e4:
		return fmt.Sprintf("%gk", v/1e3)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
	}
}

type series struct {
	name   string
	color  color.RGBA
	values []float64 // NaN: no bar
}

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
}

const (
	marginLeft   = 90
	marginRight  = 20
	marginTop    = 64
	marginBottom = 56
)

// draw renders the chart in the rectangle (x0, y0, w, h) of c.
func (bc barChart) draw(c *canvas, x0, y0, w, h int) {
	var all []float64
	for _, s := range bc.series {
		all = append(all, s.values...)
	}
	var extra []float64
	for _, r := range bc.refs {
		extra = append(extra, r.value)
	}
	ax := newAxis(all, bc.log, extra...)
	px0, py0 := x0+marginLeft, y0+marginTop
	pw, ph := w-marginLeft-marginRight, h-marginTop-marginBottom
	yOf := func(v float64) int { return py0 + ph - int(math.Round(ax.frac(v)*float64(ph))) }

	c.text(x0+12, y0+10, bc.title, 2, black)
	drawLegend(c, x0+12, y0+36, bc.series)
	for _, t := range ax.ticks() {
		y := yOf(t)
		c.line(px0, y, px0+pw, y, lightGrey, 1, 0)
		c.textRight(px0-6, y-7, formatNum(t), 2, grey)
	}
	c.textUp(x0+12, py0+ph/2, bc.ylabel, 2, grey)
	for _, r := range bc.refs {
		y := yOf(r.value)
		c.line(px0, y, px0+pw, y, red, 2, 6)
		c.text(px0+6, y-18, r.label, 2, red)
	}
	n := len(bc.categories)
	if n == 0 {
		return
	}
	groupW := float64(pw) / float64(n)
	barW := int(groupW * 0.8 / float64(len(bc.series)))
	for i, cat := range bc.categories {
		gx := px0 + int(groupW*float64(i)+groupW*0.1)
		for j, s := range bc.series {
			v := s.values[i]
			if math.IsNaN(v) || (bc.log && v <= 0) {
				continue
			}
			bx := gx + j*barW
			c.fill(bx+1, yOf(v), bx+barW-1, py0+ph, s.color)
			if bc.labelFmt != "" && barW >= 20 {
				lbl := fmt.Sprintf(bc.labelFmt, v)
				scale := 1
				if textWidth(lbl, 2) <= barW-2 {
					scale = 2
				}
				c.textCentered(bx+barW/2, yOf(v)-8*scale-2, lbl, scale, black)
			}
		}
		c.textCentered(gx+int(groupW*0.4), py0+ph+10, cat, 2, black)
	}
	c.line(px0, py0+ph, px0+pw, py0+ph, black, 2, 0)
	c.line(px0, py0, px0, py0+ph, black, 2, 0)
}

func drawLegend(c *canvas, x, y int, ss []series) {
	for _, s := range ss {
		c.fill(x, y, x+14, y+14, s.color)
		c.text(x+20, y, s.name, 2, black)
		x += 20 + textWidth(s.name, 2) + 24
	}
}

type lineSeries struct {
	name   string
	color  color.RGBA
	points [][2]float64
	dash   int
}

type lineChart struct {
	title, xlabel, ylabel string
	series                []lineSeries
}

func (lc lineChart) draw(c *canvas, x0, y0, w, h int) {
	var xs, ys []float64
	for _, s := range lc.series {
		for _, p := range s.points {
			xs, ys = append(xs, p[0]), append(ys, p[1])
		}
	}
	ax, ay := newAxis(xs, false), newAxis(ys, false)
	px0, py0 := x0+marginLeft, y0+marginTop
	pw, ph := w-marginLeft-marginRight, h-marginTop-marginBottom
	xOf := func(v float64) int { return px0 + int(math.Round(ax.frac(v)*float64(pw))) }
	yOf := func(v float64) int { return py0 + ph - int(math.Round(ay.frac(v)*float64(ph))) }

	c.text(x0+12, y0+10, lc.title, 2, black)
	var legend []series
	for _, s := range lc.series {
		legend = append(legend, series{name: s.name, color: s.color})
	}
	drawLegend(c, x0+12, y0+36, legend)
	for _, t := range ay.ticks() {
		c.line(px0, yOf(t), px0+pw, yOf(t), lightGrey, 1, 0)
		c.textRight(px0-6, yOf(t)-7, formatNum(t), 2, grey)
	}
	for _, t := range ax.ticks() {
		c.line(xOf(t), py0, xOf(t), py0+ph, lightGrey, 1, 0)
		c.textCentered(xOf(t), py0+ph+8, formatNum(t), 2, grey)
	}
	c.textCentered(px0+pw/2, py0+ph+30, lc.xlabel, 2, grey)
	c.textUp(x0+12, py0+ph/2, lc.ylabel, 2, grey)
	for _, s := range lc.series {
		for i := 1; i < len(s.points); i++ {
			a, b := s.points[i-1], s.points[i]
			c.line(xOf(a[0]), yOf(a[1]), xOf(b[0]), yOf(b[1]), s.color, 3, s.dash)
		}
	}
	c.line(px0, py0+ph, px0+pw, py0+ph, black, 2, 0)
	c.line(px0, py0, px0, py0+ph, black, 2, 0)
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
	save := func(c *canvas, name string) error {
		files = append(files, name)
		return c.save(filepath.Join(dir, name))
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
		c := newCanvas(pw, ph*len(concs))
		for k, conc := range concs {
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
			barChart{
				title:      fmt.Sprintf("Throughput, ours / CRD, concurrency %d (log scale; above the line: ours faster)", conc),
				ylabel:     "ratio",
				categories: labels, series: ss, log: true,
				refs:     []refLine{{1, "1.0x"}},
				labelFmt: "%.2f",
			}.draw(c, 0, k*ph, pw, ph)
		}
		if err := save(c, "throughput-ratio.png"); err != nil {
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
			c := newCanvas(pw, ph*len(concs))
			for k, conc := range concs {
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
				barChart{title: fmt.Sprintf(m.title, conc), ylabel: m.ylabel, categories: labels, series: ss, log: true}.
					draw(c, 0, k*ph, pw, ph)
			}
			if err := save(c, m.file); err != nil {
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
		c := newCanvas(900, 440)
		barChart{title: fmt.Sprintf("Watch latency, write to event at %d watchers (ms)", res.Watch[0].Watchers),
			ylabel: "ms", categories: cats, series: []series{p50, p99}, labelFmt: "%.1f"}.draw(c, 0, 0, 900, 440)
		if err := save(c, "watch.png"); err != nil {
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
		c := newCanvas(900, 460)
		barChart{title: fmt.Sprintf("Memory to hold %d objects (MiB)", m.Objects), ylabel: "MiB",
			categories: []string{"our server: Databases", "kube-apiserver: CRD"},
			series:     []series{rss, heap, total}, labelFmt: "%.0f"}.draw(c, 0, 0, 900, 460)
		if err := save(c, "memory.png"); err != nil {
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
		const pw, ph = 1100, 440
		c := newCanvas(pw, ph*len(sizes))
		for k, n := range sizes {
			var ls []lineSeries
			for _, r := range res.Controller {
				if r.Databases != n {
					continue
				}
				s := lineSeries{name: fmt.Sprintf("%s (%.0f s)", r.Kind, r.Seconds), color: color.RGBA{15, 157, 88, 255}, points: r.Curve}
				if r.Kind == "floor" {
					s.color, s.dash = grey, 8
					s.name = fmt.Sprintf("floor: plain client (%.0f s)", r.Seconds)
				} else {
					s.name = fmt.Sprintf("controller: Databases Ready (%.0f s)", r.Seconds)
				}
				ls = append(ls, s)
			}
			lineChart{title: fmt.Sprintf("%d Databases created at once: how many are Ready over time", n),
				xlabel: "seconds since the first create", ylabel: "ready", series: ls}.draw(c, 0, k*ph, pw, ph)
		}
		if err := save(c, "controller.png"); err != nil {
			return err
		}
	}
	fmt.Printf("plots: %s\n", strings.Join(files, ", "))
	return nil
}
