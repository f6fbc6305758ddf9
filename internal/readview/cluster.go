package readview

import (
	"cmp"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// Holder is who holds a GPU or a part of it: a job's or a hold's id, and
// the job's short number ("" for a hold, or a job no longer in memory).
type Holder struct {
	ID, Number string
}

// GPUBooks is what the orchestrator's books say of one GPU, copied under
// its read lock: who owns it whole, and who holds its MIG slices and MPS
// shares.
type GPUBooks struct {
	Owner  Holder // ID "": no job or hold owns the whole GPU
	Held   bool   // the owner is a hold, not a job
	Shared bool   // the GPU is shared through MPS
	// MIG is the GPU's MIG layout, a copy the builder may change (nil:
	// not in MIG mode), and Slices the holder of each of its devices, by
	// index into MIG.Devices (ID "": free).
	MIG    *api.MIG
	Slices []Holder
	Shares []api.GPUShareHolder // the MPS shares running on it
	// PartsBusy: some slice or share of the GPU is held.
	PartsBusy bool
}

// NodeBooks is one node for GET /cluster/gpu-status: the node's own view
// (nodebook's: its state, its GPUs' readings and foreign processes) and
// the books of each of its GPUs, in the order of View.GPUs.
type NodeBooks struct {
	View api.Node
	Down bool
	GPUs []GPUBooks
}

// Cluster is GET /cluster/gpu-status: each GPU with its holders, the
// cluster's counts (a GPU is allocated when a job or hold owns it or a
// part of it, foreign when only processes outside Corral use it,
// available when neither and its node is up), and the nodes in natural
// order of their ids (gpu-2 before gpu-10).
func Cluster(nodes []NodeBooks) api.ClusterStatus {
	cs := api.ClusterStatus{Nodes: make([]api.Node, 0, len(nodes))}
	for _, nb := range nodes {
		an := nb.View
		for k := range an.GPUs {
			g := &an.GPUs[k]
			var b GPUBooks
			if k < len(nb.GPUs) {
				b = nb.GPUs[k]
			}
			cs.TotalGPUs++
			showParts(g, &b)
			switch {
			case b.Owner.ID != "":
				holder := b.Owner.ID
				g.AllocatedTo, g.Held, g.AllocatedNumber = &holder, b.Held, b.Owner.Number
				cs.AllocatedGPUs++
				if b.Held {
					cs.HeldGPUs++
				}
			case b.PartsBusy:
				cs.AllocatedGPUs++
			case len(g.Foreign) > 0:
				cs.ForeignGPUs++
			case nb.Down:
			default:
				cs.AvailableGPUs++
			}
		}
		cs.Nodes = append(cs.Nodes, an)
	}
	slices.SortFunc(cs.Nodes, func(a, b api.Node) int { return CompareNatural(a.NodeID, b.NodeID) })
	return cs
}

// showParts shows who holds the GPU's MIG slices and MPS shares.
func showParts(g *api.GPU, b *GPUBooks) {
	g.Shared = b.Shared
	if b.Shared {
		g.ShareLimits = api.ShareLimitsMPS
	}
	if b.MIG != nil {
		for i := range b.MIG.Devices {
			if i < len(b.Slices) && b.Slices[i].ID != "" {
				b.MIG.Devices[i].AllocatedTo, b.MIG.Devices[i].AllocatedNumber = b.Slices[i].ID, b.Slices[i].Number
			}
		}
		g.MIG = b.MIG
	}
	g.Shares = append(g.Shares, b.Shares...)
}

// CompareNatural orders names as people do: runs of digits by their value,
// so gpu-2 comes before gpu-10 (ties, such as n01 and n1, byte by byte).
func CompareNatural(a, b string) int {
	return cmp.Or(compareRuns(a, b), strings.Compare(a, b))
}

func compareRuns(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits counts the digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
