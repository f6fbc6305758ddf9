package readview

import (
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

func TestCluster(t *testing.T) {
	node := func(id string, down bool, gpus ...GPUBooks) NodeBooks {
		nb := NodeBooks{View: api.Node{NodeID: id}, Down: down, GPUs: gpus}
		for range gpus {
			nb.View.GPUs = append(nb.View.GPUs, api.GPU{})
		}
		return nb
	}
	foreign := func(nb NodeBooks, k int) NodeBooks {
		nb.View.GPUs[k].Foreign = []api.ForeignProcess{{PID: 7}}
		return nb
	}
	tests := []struct {
		name                                string
		nodes                               []NodeBooks
		total, allocated, held, foreign, ok int
		order                               []string
	}{
		{"free GPUs on an up node are available", []NodeBooks{node("n1", false, GPUBooks{}, GPUBooks{})}, 2, 0, 0, 0, 2, []string{"n1"}},
		{"a down node's free GPUs are not", []NodeBooks{node("n1", true, GPUBooks{})}, 1, 0, 0, 0, 0, []string{"n1"}},
		{"owned by a job, by a hold", []NodeBooks{node("n1", false, GPUBooks{Owner: Holder{"j1", "7"}}, GPUBooks{Owner: Holder{ID: "h"}, Held: true})}, 2, 2, 1, 0, 0, []string{"n1"}},
		{"a part held counts as allocated", []NodeBooks{node("n1", false, GPUBooks{PartsBusy: true})}, 1, 1, 0, 0, 0, []string{"n1"}},
		{"foreign processes only", []NodeBooks{foreign(node("n1", false, GPUBooks{}, GPUBooks{Owner: Holder{ID: "j1"}}), 0)}, 2, 1, 0, 1, 0, []string{"n1"}},
		{"natural order of nodes", []NodeBooks{node("gpu-10", false), node("gpu-2", false), node("gpu-1", false)}, 0, 0, 0, 0, 0, []string{"gpu-1", "gpu-2", "gpu-10"}},
	}
	for _, tc := range tests {
		cs := Cluster(tc.nodes)
		if cs.TotalGPUs != tc.total || cs.AllocatedGPUs != tc.allocated || cs.HeldGPUs != tc.held || cs.ForeignGPUs != tc.foreign || cs.AvailableGPUs != tc.ok {
			t.Errorf("%s: total %d allocated %d held %d foreign %d available %d, want %d %d %d %d %d", tc.name,
				cs.TotalGPUs, cs.AllocatedGPUs, cs.HeldGPUs, cs.ForeignGPUs, cs.AvailableGPUs, tc.total, tc.allocated, tc.held, tc.foreign, tc.ok)
		}
		var order []string
		for _, n := range cs.Nodes {
			order = append(order, n.NodeID)
		}
		if len(order) != len(tc.order) {
			t.Errorf("%s: nodes %v, want %v", tc.name, order, tc.order)
			continue
		}
		for i := range order {
			if order[i] != tc.order[i] {
				t.Errorf("%s: nodes %v, want %v", tc.name, order, tc.order)
				break
			}
		}
	}
}

func TestClusterHolders(t *testing.T) {
	mig := &api.MIG{Mode: "enabled", Devices: []api.MIGDevice{{Index: 0}, {Index: 1}}}
	nodes := []NodeBooks{{View: api.Node{NodeID: "n1", GPUs: []api.GPU{{}, {}, {}}}, GPUs: []GPUBooks{
		{Owner: Holder{"j1", "12"}},
		{MIG: mig, Slices: []Holder{{}, {"j2", "13"}}, PartsBusy: true},
		{Shared: true, Shares: []api.GPUShareHolder{{JobID: "j3", Number: "14", MemoryMiB: 1024}}, PartsBusy: true},
	}}}
	g := Cluster(nodes).Nodes[0].GPUs
	if g[0].AllocatedTo == nil || *g[0].AllocatedTo != "j1" || g[0].AllocatedNumber != "12" || g[0].Held {
		t.Errorf("whole GPU: %+v, want j1 (12), not held", g[0])
	}
	if g[1].MIG == nil || g[1].MIG.Devices[0].AllocatedTo != "" || g[1].MIG.Devices[1].AllocatedTo != "j2" || g[1].MIG.Devices[1].AllocatedNumber != "13" || g[1].AllocatedTo != nil {
		t.Errorf("MIG GPU: %+v, want slice 1 held by j2 (13) and the GPU itself not allocated", g[1])
	}
	if !g[2].Shared || g[2].ShareLimits != api.ShareLimitsMPS || len(g[2].Shares) != 1 || g[2].Shares[0].Number != "14" {
		t.Errorf("shared GPU: %+v, want one MPS share of j3 (14)", g[2])
	}
	if g[0].Shared || g[0].ShareLimits != "" {
		t.Errorf("whole GPU shown shared: %+v", g[0])
	}
}
