package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"time"
)

// PolicyRun is one policy's outcome in a comparison.
type PolicyRun struct {
	Policy  string
	Outcome *Outcome // with Series recorded
}

// plotBuckets is how many points a time series is drawn with.
const plotBuckets = 400

var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// WriteSVG draws, for every run, the queue length and the utilization over
// time (time-weighted means over plotBuckets buckets) and the CDF of job
// completion times (log scale), as one SVG document.
func WriteSVG(w io.Writer, runs []PolicyRun, title string) error {
	bw := bufio.NewWriter(w)
	const width, panelH, left, top = 960, 220, 70, 40
	height := top + 3*(panelH+50) + 30
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="15">%s</text>`+"\n", left, html.EscapeString(title))
	var t0, t1 time.Time
	for _, r := range runs {
		if s := r.Outcome.Series; len(s) > 0 {
			if t0.IsZero() || s[0].At.Before(t0) {
				t0 = s[0].At
			}
			if s[len(s)-1].At.After(t1) {
				t1 = s[len(s)-1].At
			}
		}
	}
	span := max(t1.Sub(t0).Seconds(), 1)
	plotW := float64(width - left - 150)
	queues := make([][]float64, len(runs))
	utils := make([][]float64, len(runs))
	maxQ := 1.0
	for i, r := range runs {
		gpus := 1.0
		if r.Outcome.GPUs > 0 {
			gpus = float64(r.Outcome.GPUs)
		}
		queues[i], utils[i] = buckets(r.Outcome.Series, t0, span, gpus)
		maxQ = max(maxQ, slices.Max(append([]float64{0}, queues[i]...)))
	}
	days := span / 86400
	panel := func(n int, name, yLabel string, ymax float64, series [][]float64, fmtY func(float64) string) {
		y0 := float64(top + n*(panelH+50) + 20)
		fmt.Fprintf(bw, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-6, name)
		axes(bw, left, y0, plotW, panelH, ymax, yLabel, fmtY)
		for k := 0; k <= 5; k++ {
			x := float64(left) + plotW*float64(k)/5
			fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">%.1f d</text>`+"\n", x, y0+panelH+15, days*float64(k)/5)
		}
		for i, s := range series {
			fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="`, plotColors[i%len(plotColors)])
			for b, v := range s {
				x := float64(left) + plotW*(float64(b)+0.5)/float64(len(s))
				fmt.Fprintf(bw, "%.1f,%.1f ", x, y0+panelH-panelH*min(v/ymax, 1))
			}
			fmt.Fprintln(bw, `"/>`)
		}
	}
	panel(0, "Queue length (jobs waiting)", "jobs", maxQ, queues, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	panel(1, "Utilization (GPUs allocated)", "", 1, utils, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })

	// JCT CDF, log-scaled seconds.
	y0 := float64(top + 2*(panelH+50) + 20)
	fmt.Fprintf(bw, `<text x="%d" y="%.0f" font-weight="bold">Job completion time, CDF</text>`+"\n", left, y0-6)
	axes(bw, left, y0, plotW, panelH, 1, "", func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })
	lo, hi := math.Log10(1), math.Log10(1)
	jcts := make([][]float64, len(runs))
	for i, r := range runs {
		for _, j := range r.Outcome.Jobs {
			if j.Completed {
				jcts[i] = append(jcts[i], max(j.End.Sub(j.Submit).Seconds(), 1))
			}
		}
		slices.Sort(jcts[i])
		if n := len(jcts[i]); n > 0 {
			hi = max(hi, math.Log10(jcts[i][n-1]))
		}
	}
	hi = math.Ceil(hi)
	for d := lo; d <= hi; d++ {
		x := float64(left) + plotW*(d-lo)/max(hi-lo, 1)
		fmt.Fprintf(bw, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+panelH+15, secsLabel(math.Pow(10, d)))
	}
	for i, xs := range jcts {
		if len(xs) == 0 {
			continue
		}
		fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="`, plotColors[i%len(plotColors)])
		step := max(len(xs)/plotBuckets, 1)
		for k := 0; k < len(xs); k += step {
			x := float64(left) + plotW*(math.Log10(xs[k])-lo)/max(hi-lo, 1)
			fmt.Fprintf(bw, "%.1f,%.1f ", x, y0+panelH-panelH*float64(k+1)/float64(len(xs)))
		}
		x := float64(left) + plotW*(math.Log10(xs[len(xs)-1])-lo)/max(hi-lo, 1)
		fmt.Fprintf(bw, "%.1f,%.1f\"/>\n", x, y0)
	}
	// Legend.
	for i, r := range runs {
		y := top + 30 + 18*i
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			width-130, y, plotColors[i%len(plotColors)], width-112, y+10, html.EscapeString(r.Policy))
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// buckets averages queue length and utilization over equal time buckets,
// weighting each point by how long it held.
func buckets(series []Point, t0 time.Time, span, gpus float64) (queue, util []float64) {
	queue, util = make([]float64, plotBuckets), make([]float64, plotBuckets)
	width := span / plotBuckets
	for k, p := range series {
		from := p.At.Sub(t0).Seconds()
		to := from
		if k+1 < len(series) {
			to = series[k+1].At.Sub(t0).Seconds()
		}
		last := min(int(to/width), plotBuckets-1)
		for b := min(int(from/width), plotBuckets-1); b <= last; b++ {
			lo, hi := max(from, float64(b)*width), to
			if b < plotBuckets-1 {
				hi = min(to, float64(b+1)*width)
			}
			if hi <= lo {
				continue
			}
			f := (hi - lo) / width
			queue[b] += f * float64(p.Queued)
			util[b] += f * float64(p.Allocated) / gpus
		}
	}
	return queue, util
}

func axes(w io.Writer, left int, y0, plotW, h, ymax float64, label string, fmtY func(float64) string) {
	fmt.Fprintf(w, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, h)
	for k := 0; k <= 4; k++ {
		y := y0 + h - h*float64(k)/4
		fmt.Fprintf(w, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, float64(left)+plotW, y, y, left-6, y+4, fmtY(ymax*float64(k)/4))
	}
	if label != "" {
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="middle" transform="rotate(-90 %d %.1f)">%s</text>`+"\n", left-50, y0+h/2, left-50, y0+h/2, label)
	}
}

func secsLabel(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600:
		return fmt.Sprintf("%.0fm", s/60)
	case s < 86400:
		return fmt.Sprintf("%.0fh", s/3600)
	}
	return fmt.Sprintf("%.0fd", s/86400)
}
