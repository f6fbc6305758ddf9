package orchestrator

import (
	"context"
	"slices"
	"strings"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/store"
)

// JobPage is GET /jobs: the jobs that match f, newest (largest id) first,
// without events, at most f.Limit of them (0: 1000), and the cursor of
// the next page ("" when there is none). Live jobs come from memory,
// ended ones from the store's indexes (finished.go); both are read under
// the read lock, so that a job that ends meanwhile is listed once.
// Keyset pagination: the next page is the jobs whose ids sort before the
// cursor, so pages neither repeat nor skip jobs when new ones arrive.
func (o *Orchestrator) JobPage(ctx context.Context, f JobFilter) ([]api.Job, string, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	// 1. Memory: the live jobs (and the tasks of arrays not done, ended
	// or not) that match.
	mem := o.memoryPage(f)
	// 2. The store: ended jobs, plain ones and the tasks of done arrays
	// (those of the arrays in memory are listed from there), unless the
	// filter asks for a live state.
	var old []api.Job
	full := false
	if f.State == "" || f.State.Terminal() {
		q := store.JobQuery{User: f.User, Project: f.Project, Name: f.Name, Since: f.Since, Until: f.Until,
			Before: f.Cursor, Limit: f.Limit, States: []api.State{api.StateCompleted, api.StateFailed, api.StateCanceled}}
		if f.State != "" {
			q.States = []api.State{f.State}
		}
		if len(o.arr.byID) <= maxSkipArrays { // else their rows are skipped below, one by one
			for id := range o.arr.byID {
				q.SkipArrays = append(q.SkipArrays, id)
			}
		}
		var err error
		if old, err = o.cfg.Store.Jobs(ctx, q); err != nil {
			return nil, "", err
		}
		full = len(old) == f.Limit
	}
	// 3. Merge, newest first; memory wins over a row for the same id.
	// When the store's page is full, nothing below its last row is
	// listed: the store has not been read there yet.
	bound := ""
	if full {
		bound = old[len(old)-1].ID
	}
	out := make([]api.Job, 0, min(f.Limit, len(mem)+len(old)))
	i, k := 0, 0
	for len(out) < f.Limit && (i < len(mem) || k < len(old)) {
		switch {
		case k < len(old) && o.jobs[old[k].ID] != nil:
			k++ // still in memory (listed from there)
		case k >= len(old) || (i < len(mem) && mem[i].ID > old[k].ID):
			if mem[i].ID < bound {
				i = len(mem) // on the next page
				continue
			}
			out = append(out, o.view(mem[i], false))
			i++
		default:
			out = append(out, o.view(&old[k], false))
			k++
		}
	}
	next := ""
	switch {
	case len(out) == f.Limit:
		next = out[len(out)-1].ID
	case full:
		next = bound
	}
	return out, next, nil
}

// maxSkipArrays is the most arrays in memory whose tasks a page's query
// leaves out by id (one SQL parameter each).
const maxSkipArrays = 1000

// memoryPage is the jobs in memory that f matches, newest first, at most
// f.Limit of them. o.order is in id order (but for orderUnsorted), so it
// is walked down from the cursor and the walk stops once the page is
// full: a user's newest 100 among 100,000 queued jobs cost a few thousand
// steps, not a pass over every job and a sort. Read lock held.
func (o *Orchestrator) memoryPage(f JobFilter) []*api.Job {
	match := func(j *api.Job) bool {
		return (f.Cursor == "" || j.ID < f.Cursor) && (f.State == "" || j.State == f.State) &&
			(f.User == "" || j.User == f.User) && (f.Project == "" || j.Project == f.Project) &&
			(f.Name == "" || j.Name == f.Name) && !j.SubmittedAt.Before(f.Since) &&
			(f.Until.IsZero() || j.SubmittedAt.Before(f.Until))
	}
	var mem []*api.Job
	if !o.orderUnsorted {
		end := len(o.order)
		if f.Cursor != "" {
			end, _ = slices.BinarySearch(o.order, f.Cursor)
		}
		for i := end - 1; i >= 0 && len(mem) < f.Limit; i-- {
			if j := o.jobs[o.order[i]]; j != nil && match(j) {
				mem = append(mem, j)
			}
		}
		return mem
	}
	for _, j := range o.jobs {
		if match(j) {
			mem = append(mem, j)
		}
	}
	slices.SortFunc(mem, func(a, b *api.Job) int { return strings.Compare(b.ID, a.ID) })
	if len(mem) > f.Limit {
		mem = mem[:f.Limit]
	}
	return mem
}
