package jobbook

import (
	"iter"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// queue is the queued jobs: by id, counted per user, and in id order
// for the snapshot.
type queue struct {
	queued map[string]bool
	byUser map[string]int // queued jobs per user, kept with queued (SetQueued)
	// jobs holds every queued job not apart, in id order (submission
	// order), and perhaps jobs no longer queued: the snapshot hands the
	// core the queue in this order, which its sort then mostly keeps (the
	// core's order does not depend on it). Loop only (QueueOrder).
	jobs   []*api.Job
	sorted bool // jobs is in order, without repeats
	apart  func(*api.Job) bool
}

// SetQueued adds the job to the queue or takes it out, keeping the
// per-user counts in step.
func (b *Book) SetQueued(j *api.Job, queued bool) {
	q := &b.q
	if q.queued[j.ID] == queued {
		return
	}
	if queued {
		q.queued[j.ID] = true
		q.byUser[j.User]++
		if q.apart(j) {
			return // the snapshot takes it some other way (New)
		}
		// New jobs' ids only grow: appending keeps the order. A
		// requeued job's id (it may still be listed) does not.
		if n := len(q.jobs); n > 0 && j.ID <= q.jobs[n-1].ID {
			q.sorted = false
		}
		q.jobs = append(q.jobs, j)
		return
	}
	delete(q.queued, j.ID)
	if q.byUser[j.User]--; q.byUser[j.User] <= 0 {
		delete(q.byUser, j.User)
	}
	if len(q.jobs) > 2*len(q.queued)+1024 {
		b.QueueOrder() // with no cycles (the orchestrator stopped), drop the jobs that left
	}
}

// Queued is how many jobs are queued in all.
func (b *Book) Queued() int { return len(b.q.queued) }

// QueuedBy is how many of user's jobs are queued.
func (b *Book) QueuedBy(user string) int { return b.q.byUser[user] }

// IsQueued reports whether the job id is queued.
func (b *Book) IsQueued(id string) bool { return b.q.queued[id] }

// QueuedJobs yields the queued jobs, in no order.
func (b *Book) QueuedJobs() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for id := range b.q.queued {
			if !yield(b.jobs[id]) {
				return
			}
		}
	}
}

// QueuedList returns the queued jobs in a new slice, in no order.
func (b *Book) QueuedList() []*api.Job {
	out := make([]*api.Job, 0, len(b.q.queued))
	for id := range b.q.queued {
		out = append(out, b.jobs[id])
	}
	return out
}

// QueueOrder returns the queued jobs that are not apart in id order
// (submission order), dropping from its list the jobs that left the
// queue. It changes the Book: the loop only, write lock held. The slice
// is the Book's, good until the next change of the queue.
func (b *Book) QueueOrder() []*api.Job {
	q := &b.q
	if !q.sorted {
		slices.SortFunc(q.jobs, func(a, b *api.Job) int { return strings.Compare(a.ID, b.ID) })
		q.jobs = slices.CompactFunc(q.jobs, func(a, b *api.Job) bool { return a.ID == b.ID })
		q.sorted = true
	}
	in := q.jobs[:0]
	for _, j := range q.jobs {
		if q.queued[j.ID] {
			in = append(in, j)
		}
	}
	clear(q.jobs[len(in):])
	q.jobs = in
	return in
}
