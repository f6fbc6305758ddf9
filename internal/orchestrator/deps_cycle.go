package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/deps"
)

// eligible returns the jobs of queue (in its order) whose dependencies
// are met: the scheduling snapshot's queue. Each held job's verdict is
// kept in o.deps.jobs for the views; those whose dependency can no
// longer be met are canceled in tx (reason dependency_never_satisfied)
// once the dependency timeout has passed, and the jobs held with them are
// looked at again at once (some may have depended on them). The returned
// slice is reused by the next call. Loop only, write lock held.
func (o *Orchestrator) eligible(tx *txn, queue []*api.Job) []*api.Job {
	o.deps.pass++
	o.deps.held = 0
	withDeps := 0
	for _, j := range queue {
		if j.DependsOn != "" {
			withDeps++
		}
	}
	if withDeps == 0 {
		o.deps.jobs = nil
		return queue
	}
	if o.deps.jobs == nil || len(o.deps.jobs) > 2*withDeps+1024 {
		o.deps.jobs = o.pruneDeps(withDeps)
	}
	ev := &depEval{memo: map[memoKey]depCheck{}}
	timeout := o.dependencyTimeout()
	out := o.deps.buf[:0]
	var doomed []*api.Job
	held := o.deps.heldBuf[:0]
	// place sends j where its verdict says: out (met: a singleton job
	// then holds its key for the rest of the pass), doomed (never, past
	// the timeout), or, reporting true, back to the held.
	place := func(j *api.Job, d *depEntry) (stillHeld bool) {
		switch {
		case d.check.verdict == depMet:
			out = append(out, j)
			if k := (singletonKey{j.User, j.Name}); ev.running != nil && ev.running[k] == nil && d.singleton {
				ev.running[k] = j
			}
		case d.check.verdict == depNever && !tx.now.Before(d.check.since.Add(timeout)):
			doomed = append(doomed, j)
		default:
			return true
		}
		return false
	}
	for _, j := range queue {
		if j.DependsOn == "" {
			out = append(out, j)
			continue
		}
		d := o.deps.jobs[j.ID]
		if d == nil {
			d = o.newDepEntry(j)
			o.deps.jobs[j.ID] = d
		}
		if d.singleton && ev.running == nil {
			// Singleton: each user-and-name key is held by an active
			// job, or by the first queued singleton job let through in
			// this pass (none before this one).
			ev.running = map[singletonKey]*api.Job{}
			for id := range o.active {
				a := o.jobs[id]
				ev.running[singletonKey{a.User, a.Name}] = a
			}
		}
		d.check, d.pass = o.checkDeps(j, d, ev), o.deps.pass
		if place(j, d) {
			held = append(held, j)
		}
	}
	// Cancel after the pass (a transition may reorder the queue being
	// read), then look again at the jobs still held: some depended on
	// those just canceled, and may go now (afterany, afternotok; they
	// join the snapshot's queue out of id order, which the core's order
	// does not depend on) or can never go either.
	for len(doomed) > 0 {
		for _, j := range doomed {
			o.cancelNeverSatisfied(tx, j, o.deps.jobs[j.ID].check, timeout)
		}
		doomed = doomed[:0]
		ev.memo = map[memoKey]depCheck{} // the states changed
		still := held[:0]
		for _, j := range held {
			d := o.deps.jobs[j.ID]
			if d.check.verdict == depWait {
				d.check = o.checkDeps(j, d, ev)
			}
			if place(j, d) {
				still = append(still, j)
			}
		}
		held = still
	}
	o.deps.buf = out
	o.deps.held = len(held)
	o.deps.heldBuf = held
	return out
}

// pruneDeps returns o.deps.jobs without the entries of jobs no longer
// queued, sized for n. Write lock held.
func (o *Orchestrator) pruneDeps(n int) map[string]*depEntry {
	m := make(map[string]*depEntry, n)
	for id, d := range o.deps.jobs {
		if o.queued[id] {
			m[id] = d
		}
	}
	return m
}

// cancelNeverSatisfied cancels a queued job whose dependency can no
// longer be met. Write lock held.
func (o *Orchestrator) cancelNeverSatisfied(tx *txn, j *api.Job, c depCheck, timeout time.Duration) {
	now := tx.now
	j.FinishedAt = &now
	culprit := &api.Job{ID: "?"} // a verdict of never always names one
	if c.culprit != nil {
		culprit = c.culprit
	}
	msg := fmt.Sprintf("%s on job %s can never be met: it %s", c.kind, culprit.ID, culprit.State)
	tx.transition(j, api.StateCanceled, api.ReasonDependencyNeverSatisfied, msg)
	delete(o.deps.jobs, j.ID)
	o.log.Info("job canceled: its dependency can never be met", "job_id", j.ID, "culprit", culprit.ID, "timeout", timeout)
}

// singleton reports whether e has a singleton term.
func singleton(e deps.Expr) bool {
	for _, t := range e.Terms {
		if t.Kind == deps.Singleton {
			return true
		}
	}
	return false
}

// depHeld returns why a queued job is held by its dependencies, if it
// is: the last pass's verdict, or, for a job the last pass did not see
// (submitted or requeued since), one worked out now. Lock held.
func (o *Orchestrator) depHeld(j *api.Job) (depCheck, bool) {
	if j.DependsOn == "" || j.State != api.StateQueued {
		return depCheck{}, false
	}
	if d := o.deps.jobs[j.ID]; d != nil && d.pass == o.deps.pass {
		return d.check, d.check.verdict != depMet
	}
	c := o.checkDeps(j, o.newDepEntry(j), &depEval{})
	return c, c.verdict != depMet
}

// viewDeps sets a held job's pending reason and message in its view v.
// Read lock held.
func (o *Orchestrator) viewDeps(j *api.Job, v *api.Job) {
	if c, held := o.depHeld(j); held {
		v.QueuePosition, v.PendingReason, v.PendingMessage = 0, c.reason(), c.message(o.dependencyTimeout())
	}
}

// SetDependency replaces the depends_on of a queued job (raw "" removes
// it), checked as at submission and also for cycles through the jobs
// that depend on it. The job's row is rewritten; no state changes, so
// there is no event (the API's audit trail records the call). Only
// queued jobs: 409 otherwise.
func (o *Orchestrator) SetDependency(ctx context.Context, id, raw string) (api.Job, error) {
	v, err := o.do(ctx, func(tx *txn) (any, error) {
		j, ok := o.jobs[id]
		if !ok {
			return nil, api.NotFound("no job %q", id)
		}
		if j.State != api.StateQueued {
			return nil, api.Conflict("wrong_state", "job %s is %s: only a queued job's dependencies can change", id, j.State)
		}
		old := j.DependsOn
		if err := o.setDependsOn(j, raw, j.ArrayJobID != ""); err != nil {
			return nil, err
		}
		if j.DependsOn != old {
			tx.touch(j)
			o.dirty = true
			o.log.Info("job dependency changed", "job_id", id, "depends_on", j.DependsOn)
		}
		return o.view(j, true), nil
	})
	if err != nil {
		return api.Job{}, err
	}
	return v.(api.Job), nil
}

// heldReason reports whether a pending reason is a dependency's.
func heldReason(r string) bool {
	return r == api.ReasonDependency || r == api.ReasonDependencyNeverSatisfied
}

// positionHeld numbers GET /queue's rows again so that the jobs held by
// their dependencies come after all the others (which keep their order),
// held ones in the order they were queued.
func positionHeld(rows []api.QueuedJob) {
	held := false
	for _, q := range rows {
		held = held || heldReason(q.PendingReason)
	}
	if !held {
		return
	}
	slices.SortStableFunc(rows, func(a, b api.QueuedJob) int {
		ha, hb := heldReason(a.PendingReason), heldReason(b.PendingReason)
		switch {
		case ha != hb && ha:
			return 1
		case ha != hb:
			return -1
		case ha:
			if c := a.QueuedAt.Compare(b.QueuedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		}
		return cmp.Compare(a.QueuePosition, b.QueuePosition)
	})
	for i := range rows {
		rows[i].QueuePosition = i + 1
	}
}
