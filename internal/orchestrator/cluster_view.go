package orchestrator

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/gpubook"
	"github.com/corral-sched/corral/internal/gpuinfo"
	"github.com/corral-sched/corral/internal/readview"
)

// Cluster is GET /cluster/gpu-status: every node and GPU with its holder and
// the latest reading. The nodes' direct telemetry is read without the
// lock; the books are copied under the read lock and the view built after
// it is released (readview.Cluster).
func (o *Orchestrator) Cluster(ctx context.Context) api.ClusterStatus {
	o.mu.RLock()
	sources := make([]gpuinfo.Source, o.gpus.Nodes().Len())
	for i, n := range o.gpus.Nodes().All() {
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
	held := func(id string) bool { _, ok := o.holds.Get(id); return ok }
	nodes := make([]readview.NodeBooks, 0, o.gpus.Nodes().Len())
	for i, n := range o.gpus.Nodes().All() {
		var d0 []gpuinfo.Telemetry
		if i < len(direct) {
			d0 = direct[i]
		}
		nb := readview.NodeBooks{View: n.View(gpubook.State(n, o.jobs.Active()), d0), Down: n.IsDown()} // nodebook: the node, its GPUs' readings and foreign processes
		nb.GPUs = make([]readview.GPUBooks, len(nb.View.GPUs))
		for k := range nb.GPUs {
			nb.GPUs[k] = o.gpus.GPU(n.ID, &n.Devices[k], o.jobs.Get, held) // gpubook: its owner, slices and shares
		}
		nodes = append(nodes, nb)
	}
	o.mu.RUnlock()
	return readview.Cluster(nodes)
}
