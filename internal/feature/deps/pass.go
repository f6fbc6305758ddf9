package deps

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Eligible returns the jobs of queue (in its order) whose dependencies
// are met: the scheduling snapshot's queue (feature.Eligibility). Each
// held job's verdict is kept for the views (Pending); those whose
// dependency can no longer be met are canceled in tx (reason
// dependency_never_satisfied) once the dependency timeout has passed, and
// the jobs held with them are looked at again at once (some may have
// depended on them). The returned slice is reused by the next call.
func (tr *Tracker) Eligible(tx feature.Tx, queue []*api.Job) []*api.Job {
	tr.pass++
	tr.held = 0
	withDeps := 0
	for _, j := range queue {
		if j.DependsOn != "" {
			withDeps++
		}
	}
	if withDeps == 0 {
		tr.entries = nil
		return queue
	}
	if tr.entries == nil || len(tr.entries) > 2*withDeps+1024 {
		tr.entries = tr.prune(withDeps)
	}
	ev := &eval{memo: map[memoKey]check{}}
	timeout := tr.timeout
	now := tx.Now()
	out := tr.buf[:0]
	var doomed []*api.Job
	held := tr.heldBuf[:0]
	// place sends j where its verdict says: out (met: a singleton job
	// then holds its key for the rest of the pass), doomed (never, past
	// the timeout), or, reporting true, back to the held.
	place := func(j *api.Job, d *entry) (stillHeld bool) {
		switch {
		case d.check.verdict == met:
			out = append(out, j)
			if k := (singletonKey{j.User, j.Name}); ev.running != nil && ev.running[k] == nil && d.singleton {
				ev.running[k] = j
			}
		case d.check.verdict == never && !now.Before(d.check.since.Add(timeout)):
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
		d := tr.entries[j.ID]
		if d == nil {
			d = tr.newEntry(j)
			tr.entries[j.ID] = d
		}
		if d.singleton && ev.running == nil {
			// Singleton: each user-and-name key is held by an active
			// job, or by the first queued singleton job let through in
			// this pass (none before this one).
			ev.running = tr.activeKeys()
		}
		d.check, d.pass = tr.checkJob(j, d, ev), tr.pass
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
			tr.cancelNeverSatisfied(tx, j, tr.entries[j.ID].check, timeout)
		}
		doomed = doomed[:0]
		ev.memo = map[memoKey]check{} // the states changed
		still := held[:0]
		for _, j := range held {
			d := tr.entries[j.ID]
			if d.check.verdict == waiting {
				d.check = tr.checkJob(j, d, ev)
			}
			if place(j, d) {
				still = append(still, j)
			}
		}
		held = still
	}
	tr.buf = out
	tr.held = len(held)
	tr.heldBuf = held
	return out
}

// activeKeys maps each user-and-name key of the active jobs to one of
// them. (In a function of its own, as activeNamed.)
func (tr *Tracker) activeKeys() map[singletonKey]*api.Job {
	m := map[singletonKey]*api.Job{}
	for a := range tr.jobs.Active() {
		m[singletonKey{a.User, a.Name}] = a
	}
	return m
}

// prune returns tr.entries without the entries of jobs no longer
// queued, sized for n.
func (tr *Tracker) prune(n int) map[string]*entry {
	m := make(map[string]*entry, n)
	for id, d := range tr.entries {
		if tr.jobs.IsQueued(id) {
			m[id] = d
		}
	}
	return m
}

// cancelNeverSatisfied cancels a queued job whose dependency can no
// longer be met.
func (tr *Tracker) cancelNeverSatisfied(tx feature.Tx, j *api.Job, c check, timeout time.Duration) {
	culprit := &api.Job{ID: "?"} // a verdict of never always names one
	if c.culprit != nil {
		culprit = c.culprit
	}
	msg := fmt.Sprintf("%s on job %s can never be met: it %s", c.kind, culprit.ID, culprit.State)
	tr.jobs.Cancel(tx, j, api.ReasonDependencyNeverSatisfied, msg)
	delete(tr.entries, j.ID)
	tr.log.Info("job canceled: its dependency can never be met", "job_id", j.ID, "culprit", culprit.ID, "timeout", timeout)
}

// singleton reports whether e has a singleton term.
func singleton(e Expr) bool {
	for _, t := range e.Terms {
		if t.Kind == Singleton {
			return true
		}
	}
	return false
}

// heldBy returns why a queued job is held by its dependencies, if it
// is: the last pass's verdict, or, for a job the last pass did not see
// (submitted or requeued since), one worked out now.
func (tr *Tracker) heldBy(j *api.Job) (check, bool) {
	if j.DependsOn == "" || j.State != api.StateQueued {
		return check{}, false
	}
	if d := tr.entries[j.ID]; d != nil && d.pass == tr.pass {
		return d.check, d.check.verdict != met
	}
	c := tr.checkJob(j, tr.newEntry(j), &eval{})
	return c, c.verdict != met
}

// Pending says whether the queued job j is held by its dependencies,
// and if so its pending reason (api.ReasonDependency, or
// api.ReasonDependencyNeverSatisfied) and what it waits for, for people.
// The read lock is enough.
func (tr *Tracker) Pending(j *api.Job) (reason, message string, held bool) {
	c, held := tr.heldBy(j)
	if !held {
		return "", "", false
	}
	return c.reason(), c.message(tr.timeout), true
}

// HeldReason reports whether a pending reason is a dependency's.
func HeldReason(r string) bool {
	return r == api.ReasonDependency || r == api.ReasonDependencyNeverSatisfied
}

// PositionHeld numbers GET /queue's rows again so that the jobs held by
// their dependencies come after all the others (which keep their order),
// held ones in the order they were queued.
func PositionHeld(rows []api.QueuedJob) {
	held := false
	for _, q := range rows {
		held = held || HeldReason(q.PendingReason)
	}
	if !held {
		return
	}
	slices.SortStableFunc(rows, func(a, b api.QueuedJob) int {
		ha, hb := HeldReason(a.PendingReason), HeldReason(b.PendingReason)
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
