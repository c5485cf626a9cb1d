package web

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// Chart geometry, in SVG user units (the SVG scales to its box).
const (
	chartW, chartH = 480, 150
	padL, padR     = 64, 8
	padT, padB     = 10, 22
)

// series is one line of a chart: a value per x position (NaN: missing).
type series struct {
	Name   string
	Class  string // CSS class: colour
	Values []float64
}

// chart is a small line or stacked-bar chart rendered as inline SVG.
type chart struct {
	Title   string
	XLabels [2]string // first and last x
	Series  []series
	Stacked bool // stacked bars instead of lines
	FmtY    func(float64) string
	// Unit follows a value in the bars' tooltips ("s"); the axis labels
	// are bare numbers in the unit the title names.
	Unit string
}

// SVG renders the chart.
func (c chart) SVG() template.HTML {
	n := 0
	for _, s := range c.Series {
		n = max(n, len(s.Values))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" preserveAspectRatio="none">`, chartW, chartH, template.HTMLEscapeString(c.Title))
	lo, hi := c.bounds(n)
	if n == 0 || math.IsInf(lo, 0) {
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d">no batches yet</text></svg>`, chartW/2, chartH/2)
		return template.HTML(b.String())
	}
	fy := c.FmtY
	if fy == nil {
		fy = compact
	}
	tip := func(v float64) string {
		if c.Unit != "" {
			return fy(v) + " " + c.Unit
		}
		return fy(v)
	}
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	y := func(v float64) float64 { return padT + plotH - (v-lo)/(hi-lo)*plotH }
	// Grid and labels: bottom, middle, top.
	for i, v := range []float64{lo, (lo + hi) / 2, hi} {
		yy := y(v)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padL, chartW-padR, yy, yy)
		fmt.Fprintf(&b, `<text class="ylab" x="%d" y="%.1f" dy="%s">%s</text>`, padL-6, yy, [...]string{"0", "0.35em", "0.7em"}[i], template.HTMLEscapeString(fy(v)))
	}
	fmt.Fprintf(&b, `<text class="xlab" x="%d" y="%d">%s</text>`, padL, chartH-4, template.HTMLEscapeString(c.XLabels[0]))
	fmt.Fprintf(&b, `<text class="xlab end" x="%d" y="%d">%s</text>`, chartW-padR, chartH-4, template.HTMLEscapeString(c.XLabels[1]))
	step := plotW / float64(max(n-1, 1))
	if c.Stacked {
		bw := math.Max(plotW/float64(n)*0.7, 1)
		step = plotW / float64(n)
		base := make([]float64, n)
		for _, s := range c.Series {
			for i, v := range s.Values {
				if math.IsNaN(v) || v <= 0 {
					continue
				}
				x := padL + step*float64(i) + (step-bw)/2
				top, bot := y(base[i]+v), y(base[i])
				fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s</title></rect>`,
					s.Class, x, top, bw, bot-top, template.HTMLEscapeString(s.Name), template.HTMLEscapeString(tip(v)))
				base[i] += v
			}
		}
	} else {
		for _, s := range c.Series {
			var pts []string
			flush := func() {
				if len(pts) == 1 {
					fmt.Fprintf(&b, `<circle class="%s" r="2.5" cx="%s"/>`, s.Class, strings.Replace(pts[0], ",", `" cy="`, 1))
				} else if len(pts) > 1 {
					fmt.Fprintf(&b, `<polyline class="%s" points="%s"/>`, s.Class, strings.Join(pts, " "))
				}
				pts = pts[:0]
			}
			for i, v := range s.Values {
				if math.IsNaN(v) {
					flush()
					continue
				}
				x := padL + step*float64(i)
				if n == 1 {
					x = padL + plotW/2
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y(v)))
			}
			flush()
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// bounds returns the y range: from 0 (or the smallest value, for
// timestamps far from 0) to the largest value, never empty.
func (c chart) bounds(n int) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range n {
		sum := 0.0
		for _, s := range c.Series {
			if i >= len(s.Values) || math.IsNaN(s.Values[i]) {
				continue
			}
			v := s.Values[i]
			if c.Stacked {
				sum += max(v, 0)
				v = sum
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		return lo, hi
	}
	if c.FmtY == nil || lo >= 0 && lo < hi/2 {
		lo = math.Min(lo, 0)
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// compact renders a number briefly: 950, 1.2k, 3.4M, 0.25.
func compact(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trim(v/1e9) + "G"
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "k"
	case a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	default:
		return trim(v)
	}
}

func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
