package orchestrator

import (
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/ended"
	"github.com/corral-sched/corral/internal/feature/sizes"
	"github.com/corral-sched/corral/internal/jobbook"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/store"
)

// Job arrays are the feature of package arrays (o.arr): their books,
// rules, moments (features.go) and the API's reads and operations
// (arrays.Ops, through FeatureOps.Arrays). What is left here is what it
// reads of the orchestrator's books (arrayJobs) and the submission of an
// array's tasks into those books.

// newArrays makes the arrays feature over o's books.
func newArrays(o *Orchestrator) *arrays.Books {
	l := o.cfg.Limits
	return arrays.New(arrayJobs{o.jobs, o}, arrays.Config{MaxSize: l.MaxArraySize, MaxQueueSize: l.MaxQueueSize, MaxQueuedPerUser: l.MaxQueuedPerUser})
}

// arrayJobs is what package arrays reads of the orchestrator's books
// (arrays.Jobs): the job books themselves (Queued, QueuedBy, All), a
// transaction's jobs, and what leaves memory with a done array. Its
// methods are called with the write lock held.
type arrayJobs struct {
	*jobbook.Book
	o *Orchestrator
}

func (b arrayJobs) Changed(tx feature.Tx) map[string]*api.Job { return ownTxn(tx).dirty }

func (b arrayJobs) EndedRow(j *api.Job, at time.Time) store.EndedJob { return ended.Row(j, at) } // feature/ended

// Forget takes the tasks of arrays that are done out of memory, as
// evictFinished does plain ended jobs, with what other features keep of
// each array: its bytes (package sizes), its dependents' verdicts
// (package deps), who read its outcome from the store now.
func (b arrayJobs) Forget(tx feature.Tx, done []arrays.Done) {
	o := b.o
	var gone []*api.Job
	for _, a := range done {
		o.sizes.Add(a.Rec.User, -sizes.JobBytes(a.Template))
		o.deps.ForgetArray(a.Rec.ID)
		for _, t := range a.Tasks {
			if o.jobs.Get(t.ID) == t {
				gone = append(gone, t)
			}
		}
		o.log.Debug("job array done; it leaves memory", "array_id", a.Rec.ID, "tasks", len(a.Tasks))
	}
	o.dropEnded(gone, tx.Now()) // finished.go
}

// submitArray queues a job array in tx: its record, and one task per
// index (package arrays makes them), which join the books here. The
// limits count every task. Write lock held.
func (o *Orchestrator) submitArray(tx *txn, req *api.SubmitRequest, idemKey string, exempt bool) (submitResult, error) {
	spec, err := o.arr.Spec(req)
	if err != nil {
		return submitResult{}, err
	}
	j, err := jobspec.Parse(req, o.gpus.Capacity(o.cfg.Pools))
	if err != nil {
		return submitResult{}, err
	}
	n := len(spec.Indexes)
	// The same checks as a job's (features.go); every task gets what
	// they fill in (its dependencies, a budget's hold).
	if err := o.on.admit(&feature.Submission{Job: &j, Request: req, Array: true, Tasks: n, Exempt: exempt, Now: tx.now}); err != nil {
		return submitResult{}, err
	}
	// sizes.go: the array counts once.
	o.sizes.Add(j.User, sizes.JobBytes(&j))
	id := o.newID(tx.now)
	j.Number = tx.takeNumber(id) // feature/refs: the array's, its tasks' too
	j.SubmittedAt = tx.now
	tasks := o.arr.Add(tx, id, &j, spec, req.Array)
	for _, t := range tasks {
		o.jobs.Add(t)
	}
	for _, t := range tasks {
		o.jobs.SetQueued(t, true)
	}
	o.dirty = true
	tx.keepKey(idemKey, id) // jobs.go
	o.log.Debug("job array submitted", "array_id", id, "tasks", n, "user", j.User, "throttle", spec.Throttle)
	return submitResult{o.view(tasks[0], true), false}, nil
}

// replayArray answers a submission replayed under an idempotency key that
// made an array: its first task, as the first answer was (package arrays
// finds it, in memory or, once the array is done, in the store).
func (o *Orchestrator) replayArray(id string) (submitResult, bool) {
	j, ok := o.arr.FirstTask(o.arrayStore(), id, o.found().LookupAny)
	if !ok {
		return submitResult{}, false
	}
	return submitResult{o.view(j, true), true}, true
}

// arrayStore is the store where done arrays are read; nil for a bare
// orchestrator of a unit test.
func (o *Orchestrator) arrayStore() arrays.Store {
	if o.cfg.Store == nil {
		return nil
	}
	return o.cfg.Store
}
