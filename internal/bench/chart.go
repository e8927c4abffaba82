package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// Point is one depth of the chart: the median path read of a never-edited
// tree, of a tree edited every 10 turns, and of the flat list (beside the
// never-edited tree), in µs.
type Point struct {
	Depth                int
	Linear, Edited, Flat float64
}

// chartPoints measures path against the flat list at each depth: on the
// main conversations at the main length, and on a few conversations of
// each shape loaded for the other depths.
func (r *run) chartPoints(ctx context.Context, mainLinear, mainEdited []conversation) ([]Point, error) {
	var out []Point
	for _, depth := range r.cfg.ChartDepths {
		linear, edited := mainLinear, mainEdited
		if depth != r.cfg.Length {
			linear, edited = nil, nil
			for i := 0; i < r.cfg.ChartConversations; i++ {
				linear = append(linear, conversation{id: newUUID(), owner: fmt.Sprintf("owner-%03d", i%100)})
				edited = append(edited, conversation{id: newUUID(), owner: fmt.Sprintf("owner-%03d", i%100), editEvery: 10})
			}
			all := append(append([]conversation(nil), linear...), edited...)
			if err := r.load(ctx, all, depth, fmt.Sprintf("depth %d", depth)); err != nil {
				return nil, err
			}
			if err := r.copyToBaselines(ctx, all, nil); err != nil {
				return nil, err
			}
			if _, err := r.env.admin.Exec(ctx, `ANALYZE`); err != nil {
				return nil, err
			}
		}
		const path = `SELECT * FROM convo.path($1)`
		l, err := r.readRow(ctx, "", "chart", "", linear, path, flatRead)
		if err != nil {
			return nil, err
		}
		e, err := r.readRow(ctx, "", "chart", "", edited, path, flatRead)
		if err != nil {
			return nil, err
		}
		p := Point{Depth: depth, Linear: l.A, Edited: e.A, Flat: l.B}
		r.logf("  depth %d: path %.0f µs never edited, %.0f µs edited every 10 turns; flat %.0f µs", depth, p.Linear, p.Edited, p.Flat)
		out = append(out, p)
	}
	return out, nil
}

// SVGChart draws the points as a hand-written SVG line chart, depth against
// median latency, both axes linear from 0, so that a read linear in the
// depth is a straight line.
func SVGChart(points []Point, title string) string {
	const w, h = 780.0, 440.0
	const left, right, top, bottom = 80.0, 250.0, 50.0, 60.0
	pw, ph := w-left-right, h-top-bottom
	maxD, maxY := 0.0, 0.0
	for _, p := range points {
		maxD = math.Max(maxD, float64(p.Depth))
		maxY = math.Max(maxY, math.Max(p.Linear, math.Max(p.Edited, p.Flat)))
	}
	if maxD == 0 {
		maxD = 1
	}
	yStep := niceStep(maxY / 5)
	yMax := math.Ceil(maxY/yStep) * yStep
	if yMax == 0 {
		yMax = 1
	}
	x := func(d int) float64 { return left + pw*float64(d)/maxD }
	y := func(v float64) float64 { return top + ph*(1-v/yMax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="13">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="28" font-size="15" font-weight="bold">%s</text>`+"\n", left, escape(title))
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), left+pw, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y(v)+4, trimFloat(v/1000))
	}
	for _, p := range points {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(p.Depth), top, x(p.Depth), top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(p.Depth), top+ph+20, p.Depth)
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, top+ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">messages on the path</text>`+"\n", left+pw/2, h-18)
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">median path read, ms</text>`+"\n", top+ph/2, top+ph/2)
	series := []struct {
		name, color string
		value       func(Point) float64
	}{
		{"path, never edited", "#1f6fb4", func(p Point) float64 { return p.Linear }},
		{"path, an edit every 10 turns", "#c0392b", func(p Point) float64 { return p.Edited }},
		{"flat (conversation_id, seq) list", "#2e8b57", func(p Point) float64 { return p.Flat }},
	}
	for i, s := range series {
		var pts []string
		for _, p := range points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Depth), y(s.value(p))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2.5" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		for _, p := range points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s, %d messages: %.0f µs</title></circle>`+"\n",
				x(p.Depth), y(s.value(p)), s.color, escape(s.name), p.Depth, s.value(p))
		}
		ly := top + 10 + float64(i)*24
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", left+pw+16, ly, left+pw+40, ly, s.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+pw+46, ly+4, escape(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// trimFloat prints v without trailing zeros.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// escape makes s safe as SVG text.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
