package orchestrator

import (
	"maps"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/lazyre"
)

// A node's pool is its label "pool" (issue 16): the executor that
// registers a node sets it (agents: "agents", Ray: "ray"). A job that asks
// for a pool enters the core as the node label requirement pool=NAME, so
// placement, backfill and preemption need nothing new.

// poolLabel is the node label that names a node's pool.
const poolLabel = "pool"

// poolName is what a pool may be called.
var poolName = lazyre.New(`^[a-z][a-z0-9_-]{0,31}$`)

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

// validatePool checks the submission's pool and makes it the job's node
// label requirement pool=NAME. pools are the server's pools (Config.Pools);
// empty: any well-formed name. It changes nothing on error.
func validatePool(req *api.SubmitRequest, j *api.Job, pools []string) error {
	p := req.Pool
	if p == "" {
		return nil
	}
	if !poolName.MatchString(p) {
		return api.Invalid("pool", "%q is not a pool name (lower-case letters, digits, '_' and '-', at most 32)", truncate(p, 40))
	}
	if len(pools) > 0 && !slices.Contains(pools, p) {
		return api.Invalid("pool", "no pool %q on this server; its pools: %s", p, strings.Join(pools, ", "))
	}
	if v, ok := req.NodeLabels[poolLabel]; ok && v != p {
		return api.Invalid("pool", "pool %q and node label pool=%s disagree", p, v)
	}
	labels := maps.Clone(j.NodeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[poolLabel] = p
	j.Pool, j.NodeLabels = p, labels
	return nil
}

// executorStatus lists the executors, for GET /orchestrator/status: the
// executor's own report when it gives one, else its name alone.
func (o *Orchestrator) executorStatus() []api.ExecutorStatus {
	if h, ok := o.cfg.Executor.(exec.HealthReporter); ok {
		return h.Health()
	}
	return nil
}
