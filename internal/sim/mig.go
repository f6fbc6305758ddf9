package sim

import (
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/sched"
)

// MIG slices in the simulator. Config.MIG gives the same GPUs of every
// node a MIG layout; a trace's job that asks for a slice (Job.MIGProfile,
// JSONL mig_profile) is placed on one by the core exactly as the server
// places it (sched's gpushare.go), so a notebook-heavy trace shows what
// slicing does; without a layout such a job takes its GPUs whole, so
// that the same trace runs with and without slices. A MIG GPU is never free as a whole; it counts as
// allocated while any of its slices is held. With a layout the
// simulator runs a cycle at every event with jobs queued and hands the
// core the whole queue: its shortcuts (skip.go, window.go) count whole
// GPUs only.

// initMIG puts node n's GPUs of the layout in MIG mode, all slices free,
// and returns how many it took out of the whole GPUs.
func (s *sim) initMIG(node *sched.Node) int {
	took := 0
	for g := range node.GPUs {
		layout, ok := s.cfg.MIG[node.GPUs[g].Index]
		if !ok || len(layout) == 0 {
			continue
		}
		gpu := &node.GPUs[g]
		gpu.Free, gpu.MIGSlices = false, 7
		gpu.MIG = make([]sched.Slice, len(layout))
		for k, sl := range layout {
			sl.Index, sl.Free, sl.Holder = k, true, ""
			gpu.MIG[k] = sl
		}
		took++
	}
	return took
}

// holdPart takes (hold) or frees a placement's slice on node n; false
// for a placement of whole GPUs, which the caller handles.
func (s *sim) holdPart(n int, p sched.Placement, hold bool) bool {
	if p.Part == nil || p.Part.MIG < 0 || len(p.GPUs) != 1 {
		return false
	}
	gpu := &s.nodes[n].GPUs[p.GPUs[0]]
	busy := func() bool {
		for _, sl := range gpu.MIG {
			if !sl.Free {
				return true
			}
		}
		return false
	}
	was := busy()
	for k := range gpu.MIG {
		if gpu.MIG[k].Index == p.Part.MIG {
			gpu.MIG[k].Free = !hold
		}
	}
	switch now := busy(); {
	case now && !was:
		s.migBusy++
	case was && !now:
		s.migBusy--
	}
	return true
}

// gpusOf is the GPUs a trace's job holds, for the makespan's lower bound:
// a slice its compute slices of 7 (1g.10gb: 1/7; any: the smallest, 1/7)
// when the cluster has a layout, else its GPUs.
func (s *sim) gpusOf(t *Job) float64 {
	if t.MIGProfile == "" || len(s.cfg.MIG) == 0 {
		return float64(t.GPUs)
	}
	if c, _, ok := strings.Cut(t.MIGProfile, "c."); ok { // 1c.3g.40gb: its own compute slices
		return sched.SliceFraction(atoiOr(c, 1), 7)
	}
	g, _, _ := strings.Cut(t.MIGProfile, "g.")
	return sched.SliceFraction(atoiOr(g, 1), 7)
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
