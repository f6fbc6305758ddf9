package orchestrator

import (
	"maps"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/jobspec"
)

// A node's pool is its label "pool": the executor that
// registers a node sets it (agents: "agents", Ray: "ray"). A job that asks
// for a pool enters the core as the node label requirement pool=NAME, so
// placement, backfill and preemption need nothing new.

// poolLabel is the node label that names a node's pool.
const poolLabel = jobspec.PoolLabel

// withPool returns labels with the pool label set: as they are when they
// name a pool, else a copy naming agents' pool. Every node carries its
// pool, so that a job's requirement pool=agents matches nodes registered
// without one.
func withPool(labels map[string]string) map[string]string {
	if labels[poolLabel] != "" {
		return labels
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[poolLabel] = api.PoolAgents
	return out
}

// poolOf is the pool of a node: its label, else agents (nodes registered
// before pools existed, and static nodes).
func poolOf(n *Node) string {
	if p := n.Labels[poolLabel]; p != "" {
		return p
	}
	return api.PoolAgents
}

// executorStatus lists the executors, for GET /orchestrator/status: the
// executor's own report when it gives one, else its name alone.
func (o *Orchestrator) executorStatus() []api.ExecutorStatus {
	if h, ok := o.cfg.Executor.(exec.HealthReporter); ok {
		return h.Health()
	}
	return nil
}
