package orchestrator

import (
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/sizes"
)

// Done job arrays out of memory (issue 15). An array is done when none
// of its tasks is queued or active any more. The batch that ends its last
// task also writes the array's record marked done (store/arrays_done.go)
// and adds all its tasks to the store's summary of ended jobs, which the
// counts and the fair-share ledger are rebuilt from at start-up; once
// that batch is committed, the array and its tasks leave memory
// (evictArrays) as plain ended jobs do (evictFinished), counted the same
// way. Start-up loads only the arrays that are not done. Reads of a done
// array come from the store (arrays_stored.go), and so do dependencies on
// it (package deps).
//
// Until it is done, an array keeps its ended tasks in memory: they are
// counted from there (o.jobs), not from the summary, so that no task is
// counted twice, before or after a restart.

// noteArraysDone finds the arrays whose last unfinished task tx ends,
// and adds to the batch their records marked done and all their tasks to
// the summary of ended jobs. Write lock held, before the commit.
func (o *Orchestrator) noteArraysDone(tx *txn) {
	for _, j := range tx.dirty {
		if j.ArrayJobID == "" || !j.State.Terminal() {
			continue
		}
		a := o.arr.byID[j.ArrayJobID]
		if a == nil || a.rec.Counts.Unfinished() > 0 || slices.Contains(tx.done, a) {
			continue
		}
		tx.done = append(tx.done, a)
	}
	slices.SortFunc(tx.done, func(x, y *array) int { return strings.Compare(x.rec.ID, y.rec.ID) })
	for _, a := range tx.done {
		var last time.Time
		for _, t := range a.tasks {
			end := endedJob(t, endedAt(t, tx.now))
			last = later(last, end.FinishedAt)
			tx.batch.Ended = append(tx.batch.Ended, end)
		}
		r := a.record()
		r.Finished = last
		tx.batch.Arrays = append(tx.batch.Arrays, r)
	}
}

// endedAt is when an ended job ended: FinishedAt, else its last event's
// time, else now.
func endedAt(j *api.Job, now time.Time) time.Time {
	switch {
	case j.FinishedAt != nil:
		return *j.FinishedAt
	case len(j.Events) > 0:
		return j.Events[len(j.Events)-1].At
	}
	return now
}

// evictArrays takes the arrays tx made done out of memory, with their
// tasks, once tx is committed. Write lock held.
func (o *Orchestrator) evictArrays(tx *txn) {
	var gone []*api.Job
	for _, a := range tx.done {
		id := a.rec.ID
		if o.arr.byID[id] != a {
			continue
		}
		delete(o.arr.byID, id)
		o.sizes.Add(a.rec.User, -sizes.JobBytes(&a.tmpl))
		delete(o.arr.waiting, id)
		delete(o.arr.pend, id)
		o.deps.ForgetArray(id) // their dependents read its outcome from the store now
		for _, t := range a.tasks {
			if o.jobs[t.ID] == t {
				gone = append(gone, t)
			}
		}
		o.log.Debug("job array done; it leaves memory", "array_id", id, "tasks", len(a.tasks))
	}
	o.dropEnded(gone, tx.now) // finished.go
}
