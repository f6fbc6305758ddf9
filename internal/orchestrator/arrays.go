package orchestrator

import (
	"context"
	"iter"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/ended"
	"github.com/corral-sched/corral/internal/feature/sizes"
	"github.com/corral-sched/corral/internal/jobspec"
	"github.com/corral-sched/corral/internal/store"
)

// Job arrays are the feature of package arrays (o.arr): their books,
// rules and moments (features.go). What is left here is what it reads of
// the orchestrator's books (arrayJobs), the submission of an array's
// tasks into those books, and the API's reads and ops on arrays, which
// take the lock or make a transaction; arrays_stored.go reads done arrays
// from the store.

// newArrays makes the arrays feature over o's books.
func newArrays(o *Orchestrator) *arrays.Books {
	l := o.cfg.Limits
	return arrays.New(arrayJobs{o}, arrays.Config{MaxSize: l.MaxArraySize, MaxQueueSize: l.MaxQueueSize, MaxQueuedPerUser: l.MaxQueuedPerUser})
}

// arrayJobs is what package arrays reads of the orchestrator's books
// (arrays.Jobs). Its methods are called with the write lock held.
type arrayJobs struct{ o *Orchestrator }

func (b arrayJobs) Queued() int              { return len(b.o.q.queued) }
func (b arrayJobs) QueuedBy(user string) int { return b.o.q.byUser[user] }

func (b arrayJobs) All() iter.Seq[*api.Job] { return depJobs(b).All() } // deps.go

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
			if o.jobs[t.ID] == t {
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
	j, err := jobspec.Parse(req, o.capacity())
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
		o.jobs[t.ID] = t
		o.addOrder(t.ID)
	}
	for _, t := range tasks {
		o.setQueued(t, true)
	}
	o.dirty = true
	if idemKey != "" {
		o.idem[idemKey] = id
		if tx.batch.Idempotency == nil {
			tx.batch.Idempotency = map[string]string{}
		}
		tx.batch.Idempotency[idemKey] = id
	}
	o.log.Debug("job array submitted", "array_id", id, "tasks", n, "user", j.User, "throttle", spec.Throttle)
	return submitResult{o.view(tasks[0], true), false}, nil
}

// replayArray answers a submission replayed under an idempotency key that
// made an array: its first task, as the first answer was.
func (o *Orchestrator) replayArray(id string) (submitResult, bool) {
	tasks, ok := o.arr.Tasks(id)
	if !ok {
		return o.replayDone(id) // arrays_stored.go
	}
	return submitResult{o.view(tasks[0], true), true}, true
}

// Array returns the array that id names (exactly or by prefix), with its
// counts by state and its task indexes: from memory, or from the store
// when it is done, read without the lock (reads.go).
func (o *Orchestrator) Array(id string) (api.Array, error) {
	aid, live, ok, err := o.refs.Array(id) // feature/refs
	if err != nil {
		return api.Array{}, err
	}
	if !ok {
		return api.Array{}, api.NotFound("no job array %q", id)
	}
	if live {
		o.mu.RLock()
		s, ok := o.arr.Summary(aid, true)
		o.mu.RUnlock()
		if ok {
			return s, nil
		}
		// done meanwhile: the store has it
	}
	o.beforeRead("array")
	rec, err := o.storedArray(aid) // arrays_stored.go
	if err != nil {
		return api.Array{}, err
	}
	return arrays.Summarize(rec.Array), nil
}

// ArraySummaries returns the summaries (counts, no task list) of the
// arrays named, in the order given, skipping unknown ids: from memory,
// or from the store for done arrays, read without the lock.
func (o *Orchestrator) ArraySummaries(ids []string) []api.Array {
	out := make([]api.Array, len(ids))
	have := make([]bool, len(ids))
	o.mu.RLock()
	for i, id := range ids {
		out[i], have[i] = o.arr.Summary(id, false)
	}
	o.mu.RUnlock()
	for i, id := range ids {
		if have[i] {
			continue
		}
		o.beforeRead("array")
		if rec, err := o.storedArray(id); err == nil {
			s := arrays.Summarize(rec.Array)
			s.Tasks = nil
			out[i], have[i] = s, true
		}
	}
	kept := out[:0]
	for i := range out {
		if have[i] {
			kept = append(kept, out[i])
		}
	}
	return kept
}

// ArrayOwner returns the user and project of an array.
func (o *Orchestrator) ArrayOwner(id string) (user, project string, ok bool) {
	o.mu.RLock()
	if rec, _ := o.arr.Live(id); rec != nil {
		user, project = rec.User, rec.Project
		o.mu.RUnlock()
		return user, project, true
	}
	o.mu.RUnlock()
	o.beforeRead("array")
	rec, err := o.storedArray(id)
	if err != nil {
		return "", "", false
	}
	return rec.Array.User, rec.Array.Project, true
}

// SetThrottle changes how many of an array's tasks may be active at once
// (0: no limit); the change is persisted with the array's record and takes
// effect at the next cycle. Tasks already running are never stopped.
func (o *Orchestrator) SetThrottle(ctx context.Context, id string, n int) (api.Array, error) {
	if n < 0 {
		return api.Array{}, api.Invalid("throttle", "must be 0 (no limit) or more, not %d", n)
	}
	_, err := o.do(ctx, func(tx *txn) (any, error) {
		found, changed := o.arr.SetThrottle(tx, id, n)
		if !found {
			return nil, o.throttleDone(tx, id, n) // arrays_stored.go
		}
		if changed {
			o.dirty = true
			o.log.Info("job array throttle changed", "array_id", id, "throttle", n)
		}
		return nil, nil
	})
	if err != nil {
		return api.Array{}, err
	}
	return o.Array(id)
}

// CancelArray cancels every unfinished task of an array, as Cancel does
// each: queued tasks at once, running ones with SIGTERM, then SIGKILL
// after grace (0: the configured default). stopping reports whether some
// were running and are being stopped. All of it is one transaction.
func (o *Orchestrator) CancelArray(ctx context.Context, id string, grace time.Duration) (arr api.Array, stopping bool, err error) {
	if grace <= 0 {
		grace = o.cfg.CancelGrace
	}
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		steps, stopping, found, err := o.arr.Cancel(id) // feature/arrays: what each task gets
		if !found {
			return nil, o.cancelDone(id) // arrays_stored.go
		}
		if err != nil {
			return nil, err
		}
		for _, st := range steps {
			j := st.Task
			if !st.Stop {
				now := tx.now
				j.FinishedAt = &now
				tx.transition(j, api.StateCanceled, api.ReasonCanceled, "canceled while queued (its array was canceled)")
				continue
			}
			j.CancelRequested = true
			tx.touch(j)
			jid, attempt := j.ID, j.RetryCount
			tx.after = append(tx.after, func() {
				if err := o.cfg.Executor.Stop(context.WithoutCancel(ctx), jid, attempt, grace); err != nil {
					o.log.Error("stop job", "job_id", jid, "err", err)
				}
			})
		}
		o.log.Info("job array canceled", "array_id", id, "stopping", stopping)
		return stopping, nil
	})
	if err != nil {
		return api.Array{}, false, err
	}
	arr, err = o.Array(id)
	return arr, v.(bool), err
}
