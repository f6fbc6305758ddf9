// Package jobbook keeps the jobs in memory, the shared book the
// orchestrator's loop writes and every feature reads: each job by id and
// in submission order, the queue (with its counts per user and its order
// for the snapshot), the active set (the jobs holding GPUs: scheduled,
// allocating, running) and the idempotency keys of submissions.
//
// A Book has no lock of its own. The orchestrator holds one and guards
// it with its lock, exactly as its other books: the loop, its one
// writer, changes it under the write lock; readers read it under the
// read lock. What a Book's methods return (a job, an iterator) is good
// under that lock only.
package jobbook

import (
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
)

// Book is the jobs in memory. Make one with New. It has no lock of its
// own: its owner's lock guards it, and the owner's loop is its one
// writer.
type Book struct {
	jobs map[string]*api.Job
	// order is the ids of the jobs in memory in submission order, which
	// is id order (ids are made of the time): Newest and WithPrefix
	// search it. Ids of jobs that left memory stay until Compact.
	order []string
	// unsorted: order is not in id order (a job's id came out smaller
	// than the last one's: the clock stepped back across a restart);
	// Newest and WithPrefix then read the jobs whole.
	unsorted bool
	q        queue
	active   map[string]bool   // jobs holding GPUs: scheduled, allocating, running
	keys     map[string]string // idempotency key -> the job or array it submitted
}

// New returns an empty Book. apart reports the queued jobs that the
// snapshot takes some other way than one by one (an array's tasks, by
// their array's group): they count as queued, but QueueOrder leaves them
// out. nil: none.
func New(apart func(*api.Job) bool) *Book {
	if apart == nil {
		apart = func(*api.Job) bool { return false }
	}
	return &Book{
		jobs:   map[string]*api.Job{},
		q:      queue{queued: map[string]bool{}, byUser: map[string]int{}, sorted: true, apart: apart},
		active: map[string]bool{},
		keys:   map[string]string{},
	}
}

// Get returns the job with the given id, nil when memory holds none.
func (b *Book) Get(id string) *api.Job { return b.jobs[id] }

// Len is how many jobs memory holds.
func (b *Book) Len() int { return len(b.jobs) }

// Add puts a new job in memory, last in submission order (noting when
// its id breaks the id order). It is neither queued nor active until
// SetQueued, SetActive or Moved says so.
func (b *Book) Add(j *api.Job) {
	b.jobs[j.ID] = j
	if n := len(b.order); n > 0 && j.ID <= b.order[n-1] {
		b.unsorted = true
	}
	b.order = append(b.order, j.ID)
}

// Remove takes an ended job out of memory (it is neither queued nor
// active). Its id stays in the submission order until Compact.
func (b *Book) Remove(id string) { delete(b.jobs, id) }

// OrderLen is the length of the submission order, with the ids of jobs
// that left memory and were not compacted away.
func (b *Book) OrderLen() int { return len(b.order) }

// Compact drops from the submission order the ids of jobs that left
// memory.
func (b *Book) Compact() {
	b.order = slices.DeleteFunc(b.order, func(id string) bool { _, ok := b.jobs[id]; return !ok })
}

// All yields the jobs in memory in submission order.
func (b *Book) All() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, id := range b.order {
			if j, ok := b.jobs[id]; ok && !yield(j) {
				return
			}
		}
	}
}

// Unordered yields the jobs in memory in no order: quicker than All
// when the order does not matter.
func (b *Book) Unordered() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for _, j := range b.jobs {
			if !yield(j) {
				return
			}
		}
	}
}

// Newest returns the jobs that match, newest (largest id) first, at most
// limit of them, among those whose ids sort before cursor ("": all). In
// id order the walk goes down from the cursor and stops once limit jobs
// match: a user's newest 100 among 100,000 jobs cost a few thousand
// steps, not a pass over every job and a sort, which it is when the
// order is broken.
func (b *Book) Newest(cursor string, limit int, match func(*api.Job) bool) []*api.Job {
	var out []*api.Job
	if !b.unsorted {
		end := len(b.order)
		if cursor != "" {
			end, _ = slices.BinarySearch(b.order, cursor)
		}
		for i := end - 1; i >= 0 && len(out) < limit; i-- {
			if j := b.jobs[b.order[i]]; j != nil && match(j) {
				out = append(out, j)
			}
		}
		return out
	}
	for _, j := range b.jobs {
		if (cursor == "" || j.ID < cursor) && match(j) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(x, y *api.Job) int { return strings.Compare(y.ID, x.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// WithPrefix yields the jobs in memory whose ids start with prefix: one
// run of the submission order when it is in id order.
func (b *Book) WithPrefix(prefix string) iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		if !b.unsorted {
			i, _ := slices.BinarySearch(b.order, prefix)
			for ; i < len(b.order) && strings.HasPrefix(b.order[i], prefix); i++ {
				if j, ok := b.jobs[b.order[i]]; ok && !yield(j) {
					return
				}
			}
			return
		}
		for _, id := range b.order {
			if j, ok := b.jobs[id]; ok && strings.HasPrefix(id, prefix) && !yield(j) {
				return
			}
		}
	}
}

// Moved puts j where its state says, after a transition: in the queue
// when queued, in the active set when active, out of both otherwise.
func (b *Book) Moved(j *api.Job) {
	b.SetQueued(j, j.State == api.StateQueued)
	b.SetActive(j.ID, j.State.Active())
}

// SetActive adds the job id to the active set or takes it out.
func (b *Book) SetActive(id string, active bool) {
	if active {
		b.active[id] = true
	} else {
		delete(b.active, id)
	}
}

// IsActive reports whether the job id is active (holds its GPUs).
func (b *Book) IsActive(id string) bool { return b.active[id] }

// ActiveLen is how many jobs are active.
func (b *Book) ActiveLen() int { return len(b.active) }

// Active yields the active jobs, in no order.
func (b *Book) Active() iter.Seq[*api.Job] {
	return func(yield func(*api.Job) bool) {
		for id := range b.active {
			if j := b.jobs[id]; j != nil && !yield(j) {
				return
			}
		}
	}
}

// ActiveIDs yields the ids of the active jobs, in no order.
func (b *Book) ActiveIDs() iter.Seq[string] { return maps.Keys(b.active) }

// SortedActiveIDs returns the ids of the active jobs, in order.
func (b *Book) SortedActiveIDs() []string { return slices.Sorted(maps.Keys(b.active)) }

// Key returns the job or array that a submission under an idempotency
// key made, while memory keeps the key.
func (b *Book) Key(key string) (string, bool) {
	id, ok := b.keys[key]
	return id, ok
}

// SetKey records that a submission under key made the job or array id.
func (b *Book) SetKey(key, id string) { b.keys[key] = id }

// LoadKeys replaces the keys with the stored ones (recovery).
func (b *Book) LoadKeys(keys map[string]string) {
	if keys == nil {
		keys = map[string]string{}
	}
	b.keys = keys
}

// TrimKeys forgets the keys of jobs that left memory once they are more
// than twice the jobs in memory and spare (the store keeps them).
func (b *Book) TrimKeys(spare int) {
	if len(b.keys) <= 2*len(b.jobs)+spare {
		return
	}
	for k, id := range b.keys {
		if _, ok := b.jobs[id]; !ok {
			delete(b.keys, k)
		}
	}
}
