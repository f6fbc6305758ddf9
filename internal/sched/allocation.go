package sched

import "github.com/corral-sched/corral/internal/api"

// PlacementsOf groups an allocation, in its order, into the core's
// placements: one per run of GPUs on one node. A part of a GPU (a MIG
// slice or an MPS share) is a placement of its own, with its Part.
func PlacementsOf(as []api.Allocation) []Placement {
	var ps []Placement
	for _, a := range as {
		if part := partOf(&a); part != nil {
			ps = append(ps, Placement{NodeID: a.NodeID, GPUs: []int{a.GPUID}, Part: part})
			continue
		}
		if n := len(ps); n > 0 && ps[n-1].NodeID == a.NodeID && ps[n-1].Part == nil {
			ps[n-1].GPUs = append(ps[n-1].GPUs, a.GPUID)
			continue
		}
		ps = append(ps, Placement{NodeID: a.NodeID, GPUs: []int{a.GPUID}})
	}
	return ps
}

// partOf is the core's part for an allocation (nil for a whole GPU).
func partOf(a *api.Allocation) *Part {
	switch {
	case a.MIG != nil:
		return &Part{MIG: a.MIG.Index, Profile: a.MIG.Profile, Fraction: a.Fraction}
	case a.ShareMiB > 0:
		return &Part{MIG: -1, ShareMiB: a.ShareMiB, ShareCompute: a.ShareCompute, Fraction: a.Fraction}
	}
	return nil
}
