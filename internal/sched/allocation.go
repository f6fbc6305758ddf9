package sched

import "github.com/corral-sched/corral/internal/api"

// PlacementsOf groups an allocation, in its order, into the core's
// placements: one per run of GPUs on one node.
func PlacementsOf(as []api.Allocation) []Placement {
	var ps []Placement
	for _, a := range as {
		if n := len(ps); n > 0 && ps[n-1].NodeID == a.NodeID {
			ps[n-1].GPUs = append(ps[n-1].GPUs, a.GPUID)
			continue
		}
		ps = append(ps, Placement{NodeID: a.NodeID, GPUs: []int{a.GPUID}})
	}
	return ps
}
