package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/depend"
)

// eligible returns the jobs of queue (in its order) whose dependencies
// are met: the scheduling snapshot's queue. The others are kept in
// o.deps.checks with why they wait; those whose dependency can no longer
// be met are canceled in tx (reason dependency_never_satisfied) once the
// dependency timeout has passed, and the jobs that depended on them are
// looked at again at once. The returned slice is reused by the next call.
// Loop only, write lock held.
func (o *Orchestrator) eligible(tx *txn, queue []*api.Job) []*api.Job {
	hasDeps := false
	for _, j := range queue {
		if j.DependsOn != "" {
			hasDeps = true
			break
		}
	}
	if !hasDeps {
		o.deps.checks, o.deps.exprs = nil, nil
		return queue
	}
	o.indexArrays()
	// Singleton: each user-and-name key is held by an active job, or by
	// the first queued singleton job let through in this cycle.
	var running map[singletonKey]*api.Job
	runningKeys := func() map[singletonKey]*api.Job {
		if running == nil {
			running = map[singletonKey]*api.Job{}
			for id := range o.active {
				a := o.jobs[id]
				running[singletonKey{a.User, a.Name}] = a
			}
		}
		return running
	}
	old := o.deps.exprs
	o.deps.exprs = make(map[string]depend.Expr, len(old))
	o.deps.checks = make(map[string]depCheck, len(o.deps.checks))
	timeout := o.dependencyTimeout()
	out := o.deps.buf[:0]
	var doomed []*api.Job
	for _, j := range queue {
		if j.DependsOn == "" {
			out = append(out, j)
			continue
		}
		e, ok := old[j.ID]
		if !ok {
			e = o.expr(j)
		}
		o.deps.exprs[j.ID] = e
		var keys map[singletonKey]*api.Job
		if singleton(e) {
			keys = runningKeys()
		}
		c := o.checkDeps(j, e, keys)
		switch {
		case c.verdict == depMet:
			out = append(out, j)
			if keys != nil {
				k := singletonKey{j.User, j.Name}
				if keys[k] == nil {
					keys[k] = j
				}
			}
		case c.verdict == depNever && !tx.now.Before(c.since.Add(timeout)):
			doomed = append(doomed, j)
			o.deps.checks[j.ID] = c
		default:
			o.deps.checks[j.ID] = c
		}
	}
	o.deps.buf = out
	// Cancel after the pass (a transition may reorder the queue being
	// read), then look again at the jobs still held: some may have
	// depended on those just canceled.
	for len(doomed) > 0 {
		for _, j := range doomed {
			o.cancelNeverSatisfied(tx, j, o.deps.checks[j.ID], timeout)
		}
		doomed = doomed[:0]
		for id, c := range o.deps.checks {
			j := o.jobs[id]
			if j.State != api.StateQueued || c.verdict == depNever {
				continue
			}
			if c = o.checkDeps(j, o.deps.exprs[id], nil); c.verdict == depNever && !tx.now.Before(c.since.Add(timeout)) {
				o.deps.checks[id] = c
				doomed = append(doomed, j)
			}
		}
	}
	return out
}

// cancelNeverSatisfied cancels a queued job whose dependency can no
// longer be met. Write lock held.
func (o *Orchestrator) cancelNeverSatisfied(tx *txn, j *api.Job, c depCheck, timeout time.Duration) {
	now := tx.now
	j.FinishedAt = &now
	msg := fmt.Sprintf("%s on job %s can never be met: it %s", c.kind, c.culprit.ID, c.culprit.State)
	tx.transition(j, api.StateCanceled, api.ReasonDependencyNeverSatisfied, msg)
	delete(o.deps.checks, j.ID)
	delete(o.deps.exprs, j.ID)
	o.log.Info("job canceled: its dependency can never be met", "job_id", j.ID, "culprit", c.culprit.ID, "timeout", timeout)
}

// singleton reports whether e has a singleton term.
func singleton(e depend.Expr) bool {
	for _, t := range e.Terms {
		if t.Kind == depend.Singleton {
			return true
		}
	}
	return false
}

// depHeld returns why a queued job is held by its dependencies, if it
// is: the last cycle's verdict, or, for a job the last cycle did not see,
// one worked out now. Lock held.
func (o *Orchestrator) depHeld(j *api.Job) (depCheck, bool) {
	if j.DependsOn == "" || j.State != api.StateQueued {
		return depCheck{}, false
	}
	if c, ok := o.deps.checks[j.ID]; ok {
		return c, true
	}
	if _, ok := o.pending[j.ID]; ok {
		return depCheck{}, false // the last cycle let it through
	}
	c := o.checkDeps(j, o.expr(j), nil)
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
// that depend on it. The change is an event (queued -> queued, reason
// dependency_changed). Only queued jobs: 409 otherwise.
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
		delete(o.deps.checks, id) // until the next cycle, view works it out
		delete(o.pending, id)
		if err := o.setDependsOn(j, raw, j.ArrayJobID != ""); err != nil {
			return nil, err
		}
		if j.DependsOn != old {
			msg := "depends_on removed"
			if j.DependsOn != "" {
				msg = "depends_on set to " + j.DependsOn
			}
			tx.transition(j, api.StateQueued, api.ReasonDependencyChanged, msg)
			o.log.Info("job dependency changed", "job_id", id, "depends_on", j.DependsOn)
		}
		return o.view(j, true), nil
	})
	if err != nil {
		return api.Job{}, err
	}
	return v.(api.Job), nil
}
