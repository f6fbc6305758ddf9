package arrays

import (
	"slices"
	"strings"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// BeforeCommit finds the arrays whose last unfinished task tx ends, and
// adds to its batch their records marked done and all their tasks to the
// summary of ended jobs (feature.Committer).
func (b *Books) BeforeCommit(tx feature.Tx) {
	b.done = b.done[:0]
	for _, j := range b.jobs.Changed(tx) {
		if j.ArrayJobID == "" || !j.State.Terminal() {
			continue
		}
		a := b.byID[j.ArrayJobID]
		if a == nil || a.rec.Counts.Unfinished() > 0 || slices.Contains(b.done, a) {
			continue
		}
		b.done = append(b.done, a)
	}
	slices.SortFunc(b.done, func(x, y *array) int { return strings.Compare(x.rec.ID, y.rec.ID) })
	batch := tx.Batch()
	for _, a := range b.done {
		var last time.Time
		for _, t := range a.tasks {
			end := b.jobs.EndedRow(t, endedAt(t, tx.Now()))
			if end.FinishedAt.After(last) {
				last = end.FinishedAt
			}
			batch.Ended = append(batch.Ended, end)
		}
		r := a.record()
		r.Finished = last
		batch.Arrays = append(batch.Arrays, r)
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

// Committed takes the arrays tx made done out of the books, and tells
// Jobs.Forget of them, once tx is committed (feature.Committer).
func (b *Books) Committed(tx feature.Tx) {
	if len(b.done) == 0 {
		return
	}
	var gone []Done
	for _, a := range b.done {
		id := a.rec.ID
		if b.byID[id] != a {
			continue
		}
		delete(b.byID, id)
		delete(b.waiting, id)
		delete(b.pend, id)
		gone = append(gone, Done{Rec: &a.rec, Template: &a.tmpl, Tasks: a.tasks})
	}
	clear(b.done)
	b.done = b.done[:0]
	b.jobs.Forget(tx, gone)
}
