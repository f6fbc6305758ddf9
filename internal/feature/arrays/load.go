package arrays

import (
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// AddTasks adds to st.Jobs the tasks that have no row of their own yet
// (queued since their array's submission: see Add), made from their
// array's record, and gives tasks with a row the submission event that
// only the record holds; st.Jobs stays in id order. At start-up, before
// st.Jobs is loaded.
func AddTasks(st *store.State) {
	if len(st.Arrays) == 0 {
		return
	}
	have := make(map[string]*api.Job, len(st.Jobs))
	for i := range st.Jobs {
		if st.Jobs[i].ArrayJobID != "" {
			have[st.Jobs[i].ID] = &st.Jobs[i]
		}
	}
	for ri := range st.Arrays {
		r := &st.Arrays[ri]
		r.Template.SubmittedAt = r.Array.SubmittedAt
		for k := range r.Array.Tasks {
			idx := &r.Array.Tasks[k]
			id := r.Array.ID + "_" + strconv.Itoa(*idx)
			if j := have[id]; j != nil {
				if len(j.Events) == 0 || j.Events[0].From != "" {
					sub := api.Event{At: r.Array.SubmittedAt, To: api.StateQueued, Reason: api.ReasonSubmitted}
					j.Events = append([]api.Event{sub}, j.Events...)
				}
				continue
			}
			var t api.Job
			NewTask(&r.Template, &t, r.Array.ID, idx)
			st.Jobs = append(st.Jobs, t)
		}
	}
	slices.SortFunc(st.Jobs, func(a, b api.Job) int { return strings.Compare(a.ID, b.ID) })
}

// Load rebuilds the books from the store's records (the arrays not done)
// and the loaded jobs (Jobs.All, with their states) (feature.Loader).
// Before the loop runs.
func (b *Books) Load(st *store.State) {
	for _, r := range st.Arrays {
		rec := r.Array
		rec.Tasks = nil
		b.byID[rec.ID] = &array{rec: rec, tmpl: r.Template, odd: map[string]*api.Job{}}
	}
	for j := range b.jobs.All() {
		if a := b.byID[j.ArrayJobID]; a != nil && j.ArrayTaskID != nil {
			a.tasks = append(a.tasks, j)
		}
	}
	for _, a := range b.byID {
		slices.SortFunc(a.tasks, func(x, y *api.Job) int { return *x.ArrayTaskID - *y.ArrayTaskID })
		a.cursor = len(a.tasks)
		for i, t := range a.tasks {
			a.rec.Counts.Add(t.State, 1)
			if t.State == api.StateQueued {
				a.cursor = min(a.cursor, i)
				if a.isOdd(t) {
					a.odd[t.ID] = t
				}
			}
		}
		if a.rec.Counts.Queued > 0 {
			b.waiting[a.rec.ID] = a
		}
	}
}

// Has reports whether array id is in memory (not done).
func (b *Books) Has(id string) bool { return b.byID[id] != nil }

// Len is how many arrays are in memory.
func (b *Books) Len() int { return len(b.byID) }

// IDs yields the ids of the arrays in memory, in no order.
func (b *Books) IDs() iter.Seq[string] {
	return func(yield func(string) bool) {
		for id := range b.byID {
			if !yield(id) {
				return
			}
		}
	}
}

// Live returns array id's record (its counts live) and its template, both
// the books' own (nil, nil when memory holds no such array). Callers
// only read them.
func (b *Books) Live(id string) (*api.Array, *api.Job) {
	a := b.byID[id]
	if a == nil {
		return nil, nil
	}
	return &a.rec, &a.tmpl
}

// All yields the record and template of every array in memory, in no
// order.
func (b *Books) All() iter.Seq2[*api.Array, *api.Job] {
	return func(yield func(*api.Array, *api.Job) bool) {
		for _, a := range b.byID {
			if !yield(&a.rec, &a.tmpl) {
				return
			}
		}
	}
}

// Tasks returns array id's tasks in index order (the books' own slice),
// and whether memory holds the array.
func (b *Books) Tasks(id string) ([]*api.Job, bool) {
	if a := b.byID[id]; a != nil {
		return a.tasks, true
	}
	return nil, false
}

// Knows reports whether any of the books still hold array id: its record,
// the waiting arrays, or why its group waits.
func (b *Books) Knows(id string) bool {
	_, r := b.byID[id]
	_, w := b.waiting[id]
	_, p := b.pend[id]
	return r || w || p
}
