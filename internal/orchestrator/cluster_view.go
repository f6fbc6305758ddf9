package orchestrator

import (
	"context"
	"slices"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/gpushare"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/readview"
)

// Cluster is GET /cluster/gpu-status: every node and GPU with its holder and
// the latest reading. The nodes' direct telemetry is read without the
// lock; the books are copied under the read lock and the view built after
// it is released (readview.Cluster).
func (o *Orchestrator) Cluster(ctx context.Context) api.ClusterStatus {
	o.mu.RLock()
	sources := make([]gpuinfo.Source, o.nodes.Len())
	for i, n := range o.nodes.All() {
		sources[i] = n.Telemetry
	}
	o.mu.RUnlock()
	direct := make([][]gpuinfo.Telemetry, len(sources))
	for i, src := range sources {
		if src != nil {
			if t, err := src.Telemetry(ctx); err == nil {
				direct[i] = t
			}
		}
	}
	o.mu.RLock()
	nodes := make([]readview.NodeBooks, 0, o.nodes.Len())
	for i, n := range o.nodes.All() {
		var d0 []gpuinfo.Telemetry
		if i < len(direct) {
			d0 = direct[i]
		}
		nb := readview.NodeBooks{View: n.View(o.state(n), d0), Down: n.IsDown()} // nodebook: the node, its GPUs' readings and foreign processes
		nb.GPUs = make([]readview.GPUBooks, len(nb.View.GPUs))
		for k := range nb.GPUs {
			nb.GPUs[k] = o.gpuBooks(n.ID, &n.Devices[k])
		}
		nodes = append(nodes, nb)
	}
	o.mu.RUnlock()
	return readview.Cluster(nodes)
}

// gpuBooks copies what the books say of one GPU: its owner, and the
// holders of its MIG slices and MPS shares (package gpushare). Read lock
// held.
func (o *Orchestrator) gpuBooks(node string, d *gpuinfo.Device) readview.GPUBooks {
	number := func(id string) string { // a job's short number; "" for a hold
		if j := o.jobs.Get(id); j != nil {
			return j.ShortID()
		}
		return ""
	}
	k := gpushare.Key{Node: node, GPU: d.Index}
	b := readview.GPUBooks{Shared: d.Shared, PartsBusy: o.parts.Busy(k, d.MIG)}
	if holder, ok := o.owner[gpuKey{node, d.Index}]; ok {
		b.Owner = readview.Holder{ID: holder, Number: number(holder)}
		_, b.Held = o.holds.Get(holder)
	}
	if d.MIG != nil {
		m := *d.MIG // the node's record is shared: the view changes a copy
		m.Devices = slices.Clone(m.Devices)
		b.MIG, b.Slices = &m, make([]readview.Holder, len(m.Devices))
		for i := range m.Devices {
			if h := o.parts.SliceHolder(k, m.Devices[i].Index); h != "" {
				b.Slices[i] = readview.Holder{ID: h, Number: number(h)}
			}
		}
	}
	for _, h := range o.parts.Shares(k) {
		b.Shares = append(b.Shares, api.GPUShareHolder{JobID: h.ID, User: h.User, MemoryMiB: h.MiB, Compute: h.Compute, Number: number(h.ID)})
	}
	return b
}
