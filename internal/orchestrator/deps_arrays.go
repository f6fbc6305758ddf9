package orchestrator

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/deps"
	"github.com/corral-sched/corral/internal/store"
)

// Dependencies on done arrays (arrays_evict.go). While an array is in
// memory, a term on it reads its tasks at every pass (checkTerm). Once it
// is done, its tasks no longer change, so a term on it is decided by one
// task, read from the store once, when the dependent's entry is made: the
// task that ended first among those that fail the term (afterok: a failed
// or canceled task; afternotok: a completed one), which is the culprit
// the tasks in memory gave; or, when none fails it, a stand-in job in a
// state that meets it. aftercorr reads the task of the same index. When
// an array leaves memory, the entries that name it are made again
// (forgetDepsOn).

// predecessorOf returns what a term of kind k of job j that names id
// waits on, when id is neither a job in memory nor an array in memory:
// a done array's deciding task or stand-in, else the job that ended (or
// a placeholder: predecessorJob). Lock held.
func (o *Orchestrator) predecessorOf(j *api.Job, k deps.Kind, id string) *api.Job {
	if p, ok := o.lookup(id); ok {
		return p
	}
	if strings.Contains(id, "_") || !o.isArray(id) {
		return o.predecessorJob(id) // deps_pruned.go
	}
	if k == deps.AfterCorr && j.ArrayTaskID != nil {
		p := o.predecessorJob(id + "_" + strconv.Itoa(*j.ArrayTaskID))
		if p.State == statePruned { // the array has no such index: nothing to wait for
			return &api.Job{ID: id, State: api.StateCompleted}
		}
		return p
	}
	var fails []api.State // the states of tasks that fail the term
	meets := api.StateCompleted
	switch k {
	case deps.AfterOK, deps.AfterCorr:
		fails = []api.State{api.StateFailed, api.StateCanceled}
	case deps.AfterNotOK:
		fails, meets = []api.State{api.StateCompleted}, api.StateFailed
	default: // after, afterany: every task has ended
		return &api.Job{ID: id, State: api.StateCompleted}
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeReadTimeout)
	defer cancel()
	t, err := o.cfg.Store.FirstEnded(ctx, id, fails...)
	switch {
	case err == nil:
		return &t
	case errors.Is(err, store.ErrNoJob):
		return &api.Job{ID: id, State: meets}
	default:
		o.log.Warn("read a done array's tasks from the store", "array_id", id, "err", err)
		return &api.Job{ID: id} // no state: the term waits
	}
}

// storedDependencyIDs returns up to limit ids from the store that a
// dependency naming prefix may mean: arrays, and jobs that are not tasks
// of those arrays. Lock held.
func (o *Orchestrator) storedDependencyIDs(prefix string, limit int) []string {
	return o.storedIDs("dependency ids", prefix, limit, (*store.Store).DependencyIDs) // finished.go
}
