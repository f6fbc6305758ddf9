package nodebook

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/sched"
)

// NVLinkDomains numbers a node's NVLink domains: GPUs joined by NVLink,
// directly or through others, share a number. GPUs with no peers get
// domains of their own. Without any NVLink information at all, every GPU is
// put in one domain, so that topology does not steer placement.
func NVLinkDomains(devs []gpuinfo.Device) map[int]int {
	out := make(map[int]int, len(devs))
	anyLinks := false
	parent := map[int]int{}
	var find func(int) int
	find = func(x int) int {
		if p, ok := parent[x]; ok && p != x {
			r := find(p)
			parent[x] = r
			return r
		}
		return x
	}
	for _, d := range devs {
		parent[d.Index] = d.Index
	}
	for _, d := range devs {
		for _, p := range d.NVLinkPeers {
			if _, ok := parent[p]; ok {
				anyLinks = true
				a, b := find(d.Index), find(p)
				if a != b {
					parent[max(a, b)] = min(a, b)
				}
			}
		}
	}
	for _, d := range devs {
		if anyLinks {
			out[d.Index] = find(d.Index)
		} else {
			out[d.Index] = 0
		}
	}
	return out
}

// ForeignGPUs is the set of the node's GPUs that run processes Corral did
// not start (nil: none).
func (n *Node) ForeignGPUs() map[int]bool {
	var foreign map[int]bool // nil reads as none
	for _, f := range n.foreign {
		if foreign == nil {
			foreign = map[int]bool{}
		}
		foreign[f.GPU] = true
	}
	return foreign
}

// Snap is the core's view of the node before GPU ownership is known:
// schedulable or not (and why its disk keeps it out), its labels, and
// each GPU, in the order of Devices, with its NVLink domain, free unless
// it runs foreign processes (then marked Foreign). The orchestrator then
// marks the GPUs its books hold and adds what they know of shared and
// sliced GPUs. It takes no callbacks: the cycle snapshots every node.
func (n *Node) Snap() sched.Node {
	foreign := n.ForeignGPUs()
	sn := sched.Node{ID: n.ID, Schedulable: n.Schedulable(), DiskFull: n.diskFull, Labels: n.Labels, GPUs: make([]sched.GPU, 0, len(n.Devices))}
	for _, d := range n.Devices {
		sn.GPUs = append(sn.GPUs, sched.GPU{Index: d.Index, Model: d.Model, MemoryMiB: d.MemoryMiB,
			Free: !foreign[d.Index], Foreign: foreign[d.Index], Domain: n.domain[d.Index]})
	}
	return sn
}

// View is the node as GET /nodes shows it, before its GPUs' holders are
// known: state as given, each GPU with its readings (the server's own,
// direct, when it took any, else the agent's last) and its foreign
// processes.
func (n *Node) View(state string, direct []gpuinfo.Telemetry) api.Node {
	an := api.Node{NodeID: n.ID, Hostname: n.Hostname, Address: n.Address, Labels: n.Labels, GPUCount: len(n.Devices),
		GPUType: n.Model(), State: state, Simulated: n.Simulated, GPUs: []api.GPU{}, DiskFull: n.diskFull,
		Containment: n.ContainmentShown(), Pool: n.Pool()}
	if !n.lastSeen.IsZero() {
		t := n.lastSeen
		an.LastSeen = &t
	}
	for _, d := range n.Devices {
		g := api.GPU{ID: d.Index, UUID: d.UUID, Model: d.Model, MemoryTotal: d.MemoryMiB, NVLinkPeers: d.NVLinkPeers, Simulated: d.Simulated, MIG: d.MIG}
		for _, t := range direct {
			if t.Index == d.Index {
				g.MemoryUsed, g.Utilization, g.Temperature = t.MemoryUsedMiB, t.Utilization, t.Temperature
			}
		}
		for _, r := range n.readings {
			if r.Index == d.Index {
				g.MemoryUsed, g.Utilization, g.Temperature = r.MemoryUsedMiB, r.Utilization, r.Temperature
			}
		}
		for _, f := range n.foreign {
			if f.GPU == d.Index {
				g.Foreign = append(g.Foreign, f)
			}
		}
		an.GPUs = append(an.GPUs, g)
	}
	return an
}
