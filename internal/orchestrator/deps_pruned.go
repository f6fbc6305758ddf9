package orchestrator

import (
	"errors"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/store"
)

// Dependencies on jobs that --keep-history deletes (docs/history.md,
// "Pruning and dependencies"). Pruning keeps every ended job that a
// waiting job names in its depends_on (dependedOn), so the outcome such a
// job waits for stays readable. A predecessor deleted all the same (by an
// older corral, or by hand) has an unknown outcome: afterok, afternotok
// and aftercorr on it can never be met (Slurm would let the dependent
// run; we do not run a job on an outcome nobody can read), while after
// and afterany are met, since the job had ended.

// statePruned is the state of a predecessor whose record is gone. It is
// never a job's state; only dependency verdicts see it.
const statePruned api.State = "pruned"

// predecessorJob returns the job id names in a dependency, from memory
// or the store; a placeholder in statePruned when the store no longer
// holds it, and one in no state (the term waits) when the store cannot be
// read now. Lock held.
func (o *Orchestrator) predecessorJob(id string) *api.Job {
	if j, ok := o.lookup(id); ok {
		return j
	}
	j, err := o.stored(id)
	switch {
	case err == nil:
		return &j
	case errors.Is(err, store.ErrNoJob):
		return &api.Job{ID: id, State: statePruned}
	default:
		o.log.Warn("read a predecessor from the store", "job_id", id, "err", err)
		return &api.Job{ID: id}
	}
}

// prunedVerdict is the verdict of a term of kind k on a pruned job.
func prunedVerdict(k deps.Kind) depVerdict {
	if k == deps.After || k == deps.AfterAny {
		return depMet
	}
	return depNever
}

// dependedOn returns the ids that waiting jobs name in their depends_on:
// pruning keeps those jobs. Lock held (read).
func (o *Orchestrator) dependedOn() []string {
	seen := map[string]bool{}
	var out []string
	for _, j := range o.jobs {
		if j.DependsOn == "" || j.State.Terminal() {
			continue
		}
		for _, t := range o.expr(j).Terms {
			for _, id := range t.IDs {
				if !seen[id] {
					seen[id] = true
					out = append(out, id)
				}
			}
		}
	}
	return out
}
