package orchestrator

import (
	"context"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/readview"
	"github.com/corral-sched/corral/internal/store"
)

// JobPage is GET /jobs: the jobs that match f, newest (largest id) first,
// without events, at most f.Limit of them (0: 1000), and the cursor of
// the next page ("" when there is none). Live jobs come from memory,
// ended ones from the store's indexes (finished.go). Memory is copied
// under the read lock; the store is read after it is released (reads.go),
// so a slow query never holds up the loop. A job listed from memory that
// the store returns too (it ended meanwhile) is listed once, from the
// store, whose row is the newer.
// Keyset pagination: the next page is the jobs whose ids sort before the
// cursor, so pages neither repeat nor skip jobs when new ones arrive.
func (o *Orchestrator) JobPage(ctx context.Context, f JobFilter) ([]api.Job, string, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	// 1. Memory, under the read lock: the live jobs (and the tasks of
	// arrays not done, ended or not) that match, copied.
	wantStore := f.State == "" || f.State.Terminal()
	var skip []string
	o.mu.RLock()
	mem := o.jobs.Newest(f.Cursor, f.Limit, f.Match) // in id order, a walk down from the cursor
	views := make([]api.Job, len(mem))
	for i, j := range mem {
		views[i] = o.view(j, false)
	}
	// The tasks of the arrays in memory are listed from there; past
	// maxSkipArrays their rows come from the store too, and the merge
	// lists each job once.
	if wantStore && o.arr.Len() <= maxSkipArrays {
		skip = make([]string, 0, o.arr.Len())
		for id := range o.arr.IDs() {
			skip = append(skip, id)
		}
	}
	o.mu.RUnlock()
	// 2. The store, without the lock: ended jobs, plain ones and the
	// tasks of done arrays (those of the arrays in memory are listed from
	// there), unless the filter asks for a live state.
	var old []api.Job
	full := false
	if wantStore {
		q := store.JobQuery{User: f.User, Project: f.Project, Name: f.Name, Since: f.Since, Until: f.Until,
			Before: f.Cursor, Limit: f.Limit, States: []api.State{api.StateCompleted, api.StateFailed, api.StateCanceled},
			SkipArrays: skip, MaxBytes: PageBytes}
		if f.State != "" {
			q.States = []api.State{f.State}
		}
		o.beforeRead("jobs")
		var err error
		var cut bool
		if old, cut, err = o.cfg.Store.JobsPage(ctx, q); err != nil {
			return nil, "", err
		}
		full = len(old) == f.Limit || cut
	}
	page, next := readview.MergePage(views, old, f.Limit, full)
	return page, next, nil
}

// PageBytes bounds a page of GET /jobs and GET /queue by size (package
// readview).
const PageBytes = readview.PageBytes

// maxSkipArrays is the most arrays in memory whose tasks a page's query
// leaves out by id (one SQL parameter each).
const maxSkipArrays = 1000
