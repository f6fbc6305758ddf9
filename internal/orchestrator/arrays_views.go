package orchestrator

import (
	"context"
	"slices"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Job arrays as the API sees them: lookups by id or prefix, summaries
// with counts, the throttle and the cancel of a whole array.

// summary is the array's record with its counts and overall state. Read
// lock held.
func (a *array) summary() api.Array { return summarize(a.rec) }

// summarize is an array's record with its overall state, from its counts.
func summarize(s api.Array) api.Array {
	c := s.Counts
	switch {
	case c.Active() > 0:
		s.State = api.StateRunning
	case c.Queued > 0:
		s.State = api.StateQueued
	case c.Failed > 0:
		s.State = api.StateFailed
	case c.Canceled > 0:
		s.State = api.StateCanceled
	default:
		s.State = api.StateCompleted
	}
	return s
}

// Array returns the array that id names (exactly or by prefix), with its
// counts by state and its task indexes: from memory, or from the store
// when it is done, read without the lock (reads.go).
func (o *Orchestrator) Array(id string) (api.Array, error) {
	aid, live, ok, err := o.resolveArrayID(id) // resolve_reads.go
	if err != nil {
		return api.Array{}, err
	}
	if !ok {
		return api.Array{}, api.NotFound("no job array %q", id)
	}
	if live {
		o.mu.RLock()
		if a := o.arr.byID[aid]; a != nil {
			s := a.summary()
			s.Tasks = make([]int, len(a.tasks))
			for i, t := range a.tasks {
				s.Tasks[i] = *t.ArrayTaskID
			}
			o.mu.RUnlock()
			return s, nil
		}
		o.mu.RUnlock() // done meanwhile: the store has it
	}
	o.beforeRead("array")
	rec, err := o.storedArray(aid) // arrays_stored.go
	if err != nil {
		return api.Array{}, err
	}
	return summarize(rec.Array), nil
}

// ArraySummaries returns the summaries (counts, no task list) of the
// arrays named, in the order given, skipping unknown ids: from memory,
// or from the store for done arrays, read without the lock.
func (o *Orchestrator) ArraySummaries(ids []string) []api.Array {
	out := make([]api.Array, len(ids))
	have := make([]bool, len(ids))
	o.mu.RLock()
	for i, id := range ids {
		if a := o.arr.byID[id]; a != nil {
			out[i], have[i] = a.summary(), true
		}
	}
	o.mu.RUnlock()
	for i, id := range ids {
		if have[i] {
			continue
		}
		o.beforeRead("array")
		if rec, err := o.storedArray(id); err == nil {
			s := summarize(rec.Array)
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
	if a := o.arr.byID[id]; a != nil {
		user, project = a.rec.User, a.rec.Project
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
		a := o.arr.byID[id]
		if a == nil {
			return nil, o.throttleDone(tx, id, n) // arrays_stored.go
		}
		if a.rec.Throttle != n {
			a.rec.Throttle = n
			tx.batch.Arrays = append(tx.batch.Arrays, a.record())
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
		a := o.arr.byID[id]
		if a == nil {
			return nil, o.cancelDone(id) // arrays_stored.go
		}
		if a.rec.Counts.Unfinished() == 0 {
			return nil, api.Conflict("wrong_state", "every task of array %s has already ended", id)
		}
		stopping := false
		for _, j := range a.tasks {
			switch {
			case j.State.Terminal():
			case j.State == api.StateQueued:
				now := tx.now
				j.FinishedAt = &now
				tx.transition(j, api.StateCanceled, api.ReasonCanceled, "canceled while queued (its array was canceled)")
			case !j.CancelRequested:
				j.CancelRequested = true
				tx.touch(j)
				stopping = true
				jid, attempt := j.ID, j.RetryCount
				tx.after = append(tx.after, func() {
					if err := o.cfg.Executor.Stop(context.WithoutCancel(ctx), jid, attempt, grace); err != nil {
						o.log.Error("stop job", "job_id", jid, "err", err)
					}
				})
			default:
				stopping = true
			}
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

// arrayPositions gives the queued tasks that have no position of their
// own their array's (its first task's that has one), or else a place
// after every other job: they wait for their array's throttle. It returns
// the summaries of the arrays with queued tasks, in id order. Read lock
// held.
func (o *Orchestrator) arrayPositions(rows []api.QueuedJob) []api.Array {
	if len(o.arr.waiting) == 0 {
		return nil
	}
	last := 0
	first := map[string]int{}
	for _, q := range rows {
		last = max(last, q.QueuePosition)
		if q.ArrayJobID != "" && q.QueuePosition > 0 {
			if p, ok := first[q.ArrayJobID]; !ok || q.QueuePosition < p {
				first[q.ArrayJobID] = q.QueuePosition
			}
		}
	}
	for i := range rows {
		q := &rows[i]
		if q.ArrayJobID == "" || q.QueuePosition > 0 {
			continue
		}
		if p, ok := first[q.ArrayJobID]; ok {
			q.QueuePosition = p
		} else {
			q.QueuePosition = last + 1
		}
	}
	ids := make([]string, 0, len(o.arr.waiting))
	for id := range o.arr.waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]api.Array, len(ids))
	for i, id := range ids {
		out[i] = o.arr.waiting[id].summary()
	}
	return out
}

// dashboardArrayRows is how many of an array's queued tasks the
// dashboard's updates carry (the first in queue order): it shows an array
// as one row with its counts, and these when the row is opened.
const dashboardArrayRows = 100

// trimArrays keeps at most n queued rows of each job array in q, in
// order; other rows, the statistics and the arrays' counts are kept.
func trimArrays(q api.QueueResponse, n int) api.QueueResponse {
	if len(q.Arrays) == 0 {
		return q
	}
	seen := make(map[string]int, len(q.Arrays))
	rows := q.QueuedJobs[:0:0]
	for _, r := range q.QueuedJobs {
		if r.ArrayJobID != "" {
			if seen[r.ArrayJobID] >= n {
				continue
			}
			seen[r.ArrayJobID]++
		}
		rows = append(rows, r)
	}
	q.QueuedJobs = rows
	return q
}
