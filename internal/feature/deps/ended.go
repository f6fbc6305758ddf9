package deps

import (
	"errors"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// Dependencies on jobs and arrays that have left memory.
//
// Done arrays. While an array is in memory, a term on it reads its tasks
// at every pass (checkTerm). Once it is done, its tasks no longer change,
// so a term on it is decided by one task, read from the store once, when
// the dependent's entry is made: the task that ended first among those
// that fail the term (afterok: a failed or canceled task; afternotok: a
// completed one), which is the culprit the tasks in memory gave; or, when
// none fails it, a stand-in job in a state that meets it. aftercorr reads
// the task of the same index. When an array leaves memory, the entries
// that name it are made again (ForgetArray).
//
// Pruned jobs (docs/history.md, "Pruning and dependencies"). Pruning
// keeps every ended job that a waiting job names in its depends_on
// (DependedOn), so the outcome such a job waits for stays readable. A
// predecessor deleted all the same (by an older corral, or by hand) has
// an unknown outcome: afterok, afternotok and aftercorr on it can never
// be met (Slurm would let the dependent run; we do not run a job on an
// outcome nobody can read), while after and afterany are met, since the
// job had ended.

// statePruned is the state of a predecessor whose record is gone. It is
// never a job's state; only dependency verdicts see it.
const statePruned api.State = "pruned"

// predecessorOf returns what a term of kind k of job j that names id
// waits on, when id is neither a job in memory nor an array in memory:
// a done array's deciding task or stand-in, else the job that ended (or
// a placeholder: predecessorJob).
func (tr *Tracker) predecessorOf(j *api.Job, k Kind, id string) *api.Job {
	if p, ok := tr.jobs.Recent(id); ok {
		return p
	}
	if strings.Contains(id, "_") || !tr.jobs.IsArray(id) {
		return tr.predecessorJob(id)
	}
	if k == AfterCorr && j.ArrayTaskID != nil {
		p := tr.predecessorJob(id + "_" + strconv.Itoa(*j.ArrayTaskID))
		if p.State == statePruned { // the array has no such index: nothing to wait for
			return &api.Job{ID: id, State: api.StateCompleted}
		}
		return p
	}
	var fails []api.State // the states of tasks that fail the term
	meets := api.StateCompleted
	switch k {
	case AfterOK, AfterCorr:
		fails = []api.State{api.StateFailed, api.StateCanceled}
	case AfterNotOK:
		fails, meets = []api.State{api.StateCompleted}, api.StateFailed
	default: // after, afterany: every task has ended
		return &api.Job{ID: id, State: api.StateCompleted}
	}
	t, err := tr.firstEnded(id, fails...)
	switch {
	case err == nil:
		return &t
	case errors.Is(err, store.ErrNoJob):
		return &api.Job{ID: id, State: meets}
	default:
		tr.log.Warn("read a done array's tasks from the store", "array_id", id, "err", err)
		return &api.Job{ID: id} // no state: the term waits
	}
}

// predecessorJob returns the job id names in a dependency, from memory
// or the store; a placeholder in statePruned when the store no longer
// holds it, and one in no state (the term waits) when the store cannot be
// read now.
func (tr *Tracker) predecessorJob(id string) *api.Job {
	if j, ok := tr.jobs.Recent(id); ok {
		return j
	}
	j, err := tr.stored(id)
	switch {
	case err == nil:
		return &j
	case errors.Is(err, store.ErrNoJob):
		return &api.Job{ID: id, State: statePruned}
	default:
		tr.log.Warn("read a predecessor from the store", "job_id", id, "err", err)
		return &api.Job{ID: id}
	}
}

// prunedVerdict is the verdict of a term of kind k on a pruned job.
func prunedVerdict(k Kind) verdict {
	if k == After || k == AfterAny {
		return met
	}
	return never
}

// DependedOn returns the ids that waiting jobs name in their depends_on:
// pruning keeps those jobs. The read lock is enough.
func (tr *Tracker) DependedOn() []string {
	seen := map[string]bool{}
	var out []string
	for j := range tr.jobs.All() {
		if j.DependsOn == "" || j.State.Terminal() {
			continue
		}
		for _, t := range tr.expr(j).Terms {
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
