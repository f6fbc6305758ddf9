package orchestrator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
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

// resolveArray returns the id of the array that id names: its id
// exactly, or a unique prefix of at least MinIDPrefix characters; a is
// the array when memory holds it, nil when it is done (the store holds
// it: arrays_stored.go). ok is false when id names no array. Read lock
// held.
func (o *Orchestrator) resolveArray(id string) (aid string, a *array, ok bool, err error) {
	if a := o.arr.byID[id]; a != nil {
		return id, a, true, nil
	}
	if len(id) < MinIDPrefix || strings.Contains(id, "_") {
		return "", nil, false, nil
	}
	found := map[string]*array{} // nil: a done array
	for aid, a := range o.arr.byID {
		if strings.HasPrefix(aid, id) {
			found[aid] = a
		}
	}
	for _, aid := range o.storedArrayIDs(id, len(found)+2) { // arrays_stored.go
		if _, live := o.arr.byID[aid]; !live {
			found[aid] = nil
		}
	}
	if _, exact := found[id]; exact {
		return id, nil, true, nil // done: not in o.arr.byID
	}
	n := len(found)
	if n == 0 {
		return "", nil, false, nil
	}
	for k, v := range found { // the one, when n is 1
		aid, a = k, v
	}
	// A prefix shared with jobs outside the array is ambiguous too: ids
	// begin with their submission time.
	others := 0
	for _, cand := range o.order {
		if j, live := o.jobs[cand]; live && strings.HasPrefix(cand, id) && (n > 1 || j.ArrayJobID != aid) {
			others++
		}
	}
	if n == 1 && others == 0 {
		return aid, a, true, nil
	}
	return "", nil, true, &api.Error{Status: http.StatusConflict, Code: "ambiguous_id", Field: "array_id",
		Message: fmt.Sprintf("%q is the prefix of %d arrays' ids and %d other jobs' ids; give more characters", id, n, others)}
}

// ResolveArrayID returns the id of the array that id names (exactly, or by
// a unique prefix of at least MinIDPrefix characters): 404 when none does,
// 409 ambiguous_id when several do.
func (o *Orchestrator) ResolveArrayID(id string) (string, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	aid, _, ok, err := o.resolveArray(id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", api.NotFound("no job array %q", id)
	}
	return aid, nil
}

// arrayNotJob is ResolveJobID's answer for an id that names no job but an
// array (nil when it names none): job routes take task ids.
func (o *Orchestrator) arrayNotJob(id string) error {
	aid, _, ok, err := o.resolveArray(id)
	if !ok || err != nil {
		return nil
	}
	return &api.Error{Status: http.StatusNotFound, Code: "is_array",
		Message: fmt.Sprintf("%s is a job array, not a job: see corral array show %s, or name a task as %s_INDEX", aid, aid, aid)}
}

// Array returns the array that id names (exactly or by prefix), with its
// counts by state and its task indexes: from memory, or from the store
// when it is done.
func (o *Orchestrator) Array(id string) (api.Array, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	aid, a, ok, err := o.resolveArray(id)
	if err != nil {
		return api.Array{}, err
	}
	if !ok {
		return api.Array{}, api.NotFound("no job array %q", id)
	}
	if a == nil {
		rec, err := o.storedArray(aid) // arrays_stored.go
		if err != nil {
			return api.Array{}, err
		}
		return summarize(rec.Array), nil
	}
	s := a.summary()
	s.Tasks = make([]int, len(a.tasks))
	for i, t := range a.tasks {
		s.Tasks[i] = *t.ArrayTaskID
	}
	return s, nil
}

// ArraySummaries returns the summaries (counts, no task list) of the
// arrays named, in the order given, skipping unknown ids: from memory,
// or from the store for done arrays.
func (o *Orchestrator) ArraySummaries(ids []string) []api.Array {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make([]api.Array, 0, len(ids))
	for _, id := range ids {
		if a := o.arr.byID[id]; a != nil {
			out = append(out, a.summary())
			continue
		}
		if rec, err := o.storedArray(id); err == nil {
			s := summarize(rec.Array)
			s.Tasks = nil
			out = append(out, s)
		}
	}
	return out
}

// ArrayOwner returns the user and project of an array.
func (o *Orchestrator) ArrayOwner(id string) (user, project string, ok bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if a := o.arr.byID[id]; a != nil {
		return a.rec.User, a.rec.Project, true
	}
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
