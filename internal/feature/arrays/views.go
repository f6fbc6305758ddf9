package arrays

import (
	"slices"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// Job arrays as the API sees them: summaries with counts, the throttle,
// the queue's positions of waiting tasks.

// Summarize is an array's record with its overall state, from its counts.
func Summarize(s api.Array) api.Array {
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

// Summary returns array id's record with its counts and overall state,
// with its task indexes when tasks is true; ok is false when memory
// holds no such array. Read lock held.
func (b *Books) Summary(id string, tasks bool) (s api.Array, ok bool) {
	a := b.byID[id]
	if a == nil {
		return api.Array{}, false
	}
	s = Summarize(a.rec)
	if tasks {
		s.Tasks = make([]int, len(a.tasks))
		for i, t := range a.tasks {
			s.Tasks[i] = *t.ArrayTaskID
		}
	}
	return s, true
}

// SetThrottle sets how many of array id's tasks may be active at once
// (0: no limit), adding its record to tx's batch when that changes it;
// found is false when memory holds no such array. Write lock held.
func (b *Books) SetThrottle(tx feature.Tx, id string, n int) (found, changed bool) {
	a := b.byID[id]
	if a == nil {
		return false, false
	}
	if a.rec.Throttle == n {
		return true, false
	}
	a.rec.Throttle = n
	batch := tx.Batch()
	batch.Arrays = append(batch.Arrays, a.record())
	return true, true
}

// CancelStep is what canceling its array asks of one unfinished task: end
// it at once (it is queued), or stop its running attempt (Stop).
type CancelStep struct {
	Task *api.Job
	Stop bool
}

// Cancel is what canceling the live array id asks of its tasks, in index
// order: the queued ones end now, the running ones not yet asked to stop
// are stopped. stopping: some task is running (asked to stop now or
// before). A 409 wrong_state when every task has ended; found is false
// when memory holds no such array. It changes nothing. Lock held.
func (b *Books) Cancel(id string) (steps []CancelStep, stopping, found bool, err error) {
	a := b.byID[id]
	if a == nil {
		return nil, false, false, nil
	}
	if a.rec.Counts.Unfinished() == 0 {
		return nil, false, true, api.Conflict("wrong_state", "every task of array %s has already ended", id)
	}
	tasks, _ := b.Tasks(id)
	for _, j := range tasks {
		switch {
		case j.State.Terminal():
		case j.State == api.StateQueued:
			steps = append(steps, CancelStep{Task: j})
		case !j.CancelRequested:
			steps = append(steps, CancelStep{Task: j, Stop: true})
			stopping = true
		default:
			stopping = true
		}
	}
	return steps, stopping, true, nil
}

// Positions gives the queued tasks of rows that have no position of their
// own their array's (its first task's that has one), or else a place
// after every other job: they wait for their array's throttle. It returns
// the summaries of the arrays with queued tasks, in id order. Read lock
// held.
func (b *Books) Positions(rows []api.QueuedJob) []api.Array {
	if len(b.waiting) == 0 {
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
	ids := make([]string, 0, len(b.waiting))
	for id := range b.waiting {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]api.Array, len(ids))
	for i, id := range ids {
		out[i] = Summarize(b.waiting[id].rec)
	}
	return out
}

// Trim keeps at most n queued rows of each job array in q, in order;
// other rows, the statistics and the arrays' counts are kept.
func Trim(q api.QueueResponse, n int) api.QueueResponse {
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
