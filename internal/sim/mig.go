package sim

import (
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/sched"
)

// MIG slices and MPS shares in the simulator. Config.MIG gives the same
// GPUs of every node a MIG layout, Config.Shared makes the first GPUs of
// every node not in MIG mode shareable; a trace's job that asks for a
// slice (Job.MIGProfile, JSONL mig_profile) or a share (Job.ShareMiB,
// JSONL gpu_share_mib) is placed on one by the core exactly as the server
// places it (sched's gpushare.go), so a notebook-heavy trace shows what
// slicing or sharing does; without a layout (without shared GPUs) such a
// job takes its GPUs whole, so that the same trace runs with and without.
// A MIG GPU is never free as a whole; it counts as allocated while any of
// its slices is held. A shared GPU is free as a whole while no share runs
// on it, and allocated while one does. With either the simulator runs a
// cycle at every event with jobs queued and hands the core the whole
// queue: its shortcuts (skip.go, window.go) count whole GPUs only.

// initMIG puts node n's GPUs of the layout in MIG mode, all slices free,
// marks the first Config.Shared of the others shareable, and returns how
// many it took out of the whole GPUs (the MIG ones).
func (s *sim) initMIG(node *sched.Node) int {
	took, shared := 0, 0
	for g := range node.GPUs {
		gpu := &node.GPUs[g]
		layout, ok := s.cfg.MIG[gpu.Index]
		if !ok || len(layout) == 0 {
			if shared < s.cfg.Shared {
				gpu.Share = &sched.Share{}
				shared++
			}
			continue
		}
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

// holdPart takes (hold) or frees a placement's slice or share on node n
// for job id of user; false for a placement of whole GPUs, which the
// caller handles.
func (s *sim) holdPart(n int, p sched.Placement, hold bool, id, user string) bool {
	if p.Part == nil || len(p.GPUs) != 1 {
		return false
	}
	gpu := &s.nodes[n].GPUs[p.GPUs[0]]
	if p.Part.MIG < 0 {
		s.holdShare(n, gpu, p.Part, hold, id, user)
		return true
	}
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

// holdShare takes or frees a share of a shared GPU: the first share takes
// the GPU out of the whole ones (and gives it its user), the last gives it
// back.
func (s *sim) holdShare(n int, gpu *sched.GPU, part *sched.Part, hold bool, id, user string) {
	sh := gpu.Share
	if sh == nil {
		return
	}
	if hold {
		if len(sh.Holders) == 0 && gpu.Free {
			gpu.Free = false
			s.nfree[n]--
		}
		sh.UsedMiB += part.ShareMiB
		sh.UsedCompute += part.ShareCompute
		sh.User = user
		sh.Holders = append(sh.Holders, id)
		return
	}
	k := slices.Index(sh.Holders, id)
	if k < 0 {
		return
	}
	sh.Holders = slices.Delete(sh.Holders, k, k+1)
	sh.UsedMiB -= part.ShareMiB
	sh.UsedCompute -= part.ShareCompute
	if len(sh.Holders) == 0 {
		*sh = sched.Share{}
		gpu.Free = true
		s.nfree[n]++
	}
}

// partAsked is the part of a GPU a trace's job asks for and the
// cluster offers: a slice where it has a layout, a share where it has
// shared GPUs; none (its GPUs whole) otherwise, so that the same trace
// runs with and without.
func (s *sim) partAsked(t *Job) (mig string, shareMiB int64, compute int) {
	switch {
	case t.MIGProfile != "" && len(s.cfg.MIG) > 0:
		return t.MIGProfile, 0, 0
	case t.ShareMiB > 0 && s.cfg.Shared > 0:
		return "", t.ShareMiB, t.ShareCompute
	}
	return "", 0, 0
}

// gpusOf is the GPUs a trace's job holds, for the makespan's lower bound:
// a slice its compute slices of 7 (1g.10gb: 1/7; any: the smallest, 1/7)
// when the cluster has a layout, a share its part of the GPU when the
// cluster has shared GPUs, else its GPUs.
func (s *sim) gpusOf(t *Job) float64 {
	if t.ShareMiB > 0 && s.cfg.Shared > 0 {
		return sched.ShareFraction(t.ShareMiB, s.cfg.GPUMemoryMiB, t.ShareCompute)
	}
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
