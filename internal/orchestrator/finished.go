package orchestrator

import (
	"context"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/ended"
)

// Finished jobs out of memory. A job that ends (completed,
// failed, canceled) leaves o.jobs once the batch that ended it is
// committed (evictFinished): from then on the store holds it, and views
// read it from there (Job, Jobs, JobState fall back to the store). Memory
// keeps what scheduling needs: queued and active jobs, holds, bookings,
// nodes; and, for views and log tails that come just after a job ends,
// the last ended.Recent jobs that ended (a ring).
//
// Array tasks stay with their array while it is not done: its books
// (package arrays) hold every task, ended or not. Once its last task
// ends, the array and all its tasks leave memory the same way
// (arrayJobs.Forget, arrays.go).
//
// The jobs' submission order keeps the ids of evicted jobs until it is
// compacted (when they are more than half of it; jobbook.Book.Compact).

// evictFinished takes the jobs the committed tx ended out of o.jobs (into
// the recent ring), counting their last events first. Write lock held.
func (o *Orchestrator) evictFinished(tx *txn) {
	var gone []*api.Job
	for _, j := range tx.dirty {
		switch {
		case !j.State.Terminal() || o.jobs.Get(j.ID) != j:
		case j.ArrayJobID != "":
			o.gone.Remember(j, false) // its array keeps it in o.jobs until done; the statistics read it here
		default:
			gone = append(gone, j)
		}
	}
	for _, j := range gone {
		o.gone.Remember(o.slimEnded(j)) // sizes.go
	}
	o.dropEnded(gone, tx.now)
}

// dropEnded takes ended jobs out of o.jobs and the books beside it,
// counting them (package ended) and their last events (the tally) first.
// Write lock held.
func (o *Orchestrator) dropEnded(gone []*api.Job, now time.Time) {
	if len(gone) == 0 {
		return
	}
	o.hist.Gone(gone, now) // their events not yet counted
	for _, j := range gone {
		o.jobs.Remove(j.ID)
		o.pending.Drop(j.ID)
	}
	if o.gone.Left(gone, o.jobs.OrderLen()) {
		o.jobs.Compact()
	}
	o.jobs.TrimKeys(ended.Recent) // the store keeps the keys of ended jobs
}

// found finds a job wherever it is (package ended): the live books, the
// recently ended, the store. Lock held (a read of the store is bounded).
func (o *Orchestrator) found() ended.Finder {
	return ended.Finder{Live: o.jobs, Gone: &o.gone, Store: o.cfg.Store, Log: o.log}
}

// rebuildFinished adds what ended jobs, kept only in the store, gave
// the fair-share ledger, the run-time estimator and the counts of ended
// jobs, from the store's summary (ended.Books.Rebuild). Before the loop
// runs, or write lock held.
func (o *Orchestrator) rebuildFinished(ctx context.Context) error {
	rows, err := o.cfg.Store.EndedSummary(ctx)
	if err != nil {
		return err
	}
	o.gone.Rebuild(rows, o.ledger, o.estimator)
	return nil
}

// replay returns what a submission under key gave the first time: its
// job, from memory or the store, or its array. Write lock held.
func (o *Orchestrator) replay(key string) (submitResult, bool) {
	id, ok := o.found().Submitted(key)
	if !ok {
		return submitResult{}, false
	}
	if r, ok := o.replayArray(id); ok {
		return r, true
	}
	j, ok := o.found().LookupAny(id)
	if !ok {
		return submitResult{}, false // pruned (--keep-history): a new submission
	}
	return submitResult{o.view(j, true), true}, true
}

// noteEnded adds to tx's batch the summary rows of the jobs it ends
// (ended.Summarize). Write lock held, before the commit.
func (o *Orchestrator) noteEnded(tx *txn) { ended.Summarize(&tx.batch, tx.dirty) }
