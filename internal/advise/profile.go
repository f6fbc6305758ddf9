// Package advise compares running a cluster's recorded load on the cluster
// itself with running it on cloud GPU instances (seed 000:
// right-sizing and instance selection). It is pure: a profile of the load
// and a price table in, recommendations out; no network calls.
package advise

import (
	"cmp"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Run is one attempt's hold on GPUs: GPUs on each of Nodes nodes from
// Start to End, each GPU with at least GPUMemoryGB asked (0: not asked).
type Run struct {
	Start, End  time.Time
	GPUs        int // per node
	Nodes       int
	GPUMemoryGB float64
}

// Profile sums runs over [since, until): GPU-hours clipped to the period,
// time-weighted GPUs held (peak, median, 90th percentile, with idle time
// counted as 0), and the GPU-hours of each job shape. cluster counts the
// cluster's GPUs by model.
func Profile(runs []Run, since, until time.Time, cluster map[string]int) api.LoadProfile {
	p := api.LoadProfile{Since: since.UTC(), Until: until.UTC(), Shapes: []api.LoadShape{}, ClusterGPUs: cluster}
	if p.ClusterGPUs == nil {
		p.ClusterGPUs = map[string]int{}
	}
	if !until.After(since) {
		return p
	}
	type edge struct {
		at   time.Time
		gpus int
	}
	var edges []edge
	shapes := map[[2]float64]*api.LoadShape{}
	for _, r := range runs {
		s, e := maxTime(r.Start, since), minTime(r.End, until)
		n := r.GPUs * max(r.Nodes, 1)
		if !e.After(s) || n <= 0 {
			continue
		}
		p.Jobs++
		h := float64(n) * e.Sub(s).Hours()
		p.GPUHours += h
		p.MaxJobGPUs = max(p.MaxJobGPUs, r.GPUs)
		k := [2]float64{float64(r.GPUs), r.GPUMemoryGB}
		sh := shapes[k]
		if sh == nil {
			sh = &api.LoadShape{GPUs: r.GPUs, GPUMemoryGB: r.GPUMemoryGB}
			shapes[k] = sh
		}
		sh.Jobs++
		sh.GPUHours += h
		edges = append(edges, edge{s, n}, edge{e, -n})
	}
	for _, sh := range shapes {
		p.Shapes = append(p.Shapes, *sh)
	}
	slices.SortFunc(p.Shapes, func(a, b api.LoadShape) int {
		return cmp.Or(cmp.Compare(b.GPUHours, a.GPUHours), cmp.Compare(a.GPUs, b.GPUs), cmp.Compare(a.GPUMemoryGB, b.GPUMemoryGB))
	})
	// Sweep: how long each level of GPUs held lasted.
	slices.SortFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	atLevel := map[int]time.Duration{}
	level, last := 0, since
	for _, e := range edges {
		atLevel[level] += e.at.Sub(last)
		level += e.gpus
		last = e.at
		p.PeakGPUs = max(p.PeakGPUs, level)
	}
	atLevel[level] += until.Sub(last)
	p.TypicalGPUs = quantile(atLevel, until.Sub(since), 0.5)
	p.P90GPUs = quantile(atLevel, until.Sub(since), 0.9)
	return p
}

// quantile is the level at or below which a fraction q of total lies.
func quantile(atLevel map[int]time.Duration, total time.Duration, q float64) float64 {
	levels := make([]int, 0, len(atLevel))
	for l := range atLevel {
		levels = append(levels, l)
	}
	slices.Sort(levels)
	var acc time.Duration
	for _, l := range levels {
		acc += atLevel[l]
		if float64(acc) >= q*float64(total) {
			return float64(l)
		}
	}
	if len(levels) == 0 {
		return 0
	}
	return float64(levels[len(levels)-1])
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
