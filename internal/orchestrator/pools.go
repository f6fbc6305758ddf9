package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// A node's pool is its label "pool": the executor that
// registers a node sets it (agents: "agents", Ray: "ray"). A job that asks
// for a pool enters the core as the node label requirement pool=NAME, so
// placement, backfill and preemption need nothing new. A node carries its
// pool (nodebook.WithPool, Node.Pool).

// executorStatus lists the executors, for GET /orchestrator/status: the
// executor's own report when it gives one, else its name alone.
func (o *Orchestrator) executorStatus() []api.ExecutorStatus {
	if h, ok := o.cfg.Executor.(exec.HealthReporter); ok {
		return h.Health()
	}
	return nil
}
