package orchestrator

import (
	"strconv"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/readview"
)

// QueuePageOf is QueuePage over one user's queued jobs: their rows in the
// queue's order, each with its place in the whole queue (QueuePosition),
// paged among that user's rows alone (the cursor counts their rows). The
// statistics are the whole queue's; the arrays are those of the rows
// kept. user "" is QueuePage.
func (o *Orchestrator) QueuePageOf(user string, limit int, cursor string) (api.QueueResponse, error) {
	if user == "" {
		return o.QueuePage(limit, cursor)
	}
	after := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return api.QueueResponse{}, api.Invalid("cursor", "is not a cursor this server gave (next_cursor)")
		}
		after = n
	}
	r := o.queueView()
	var rows []api.QueuedJob // the view's rows are shared: a new slice
	arrays := map[string]bool{}
	for _, q := range r.QueuedJobs {
		if q.User == user {
			rows = append(rows, q)
			if q.ArrayJobID != "" {
				arrays[q.ArrayJobID] = true
			}
		}
	}
	r.QueuedJobs = rows
	var kept []api.Array
	for _, a := range r.Arrays {
		if arrays[a.ID] {
			kept = append(kept, a)
		}
	}
	r.Arrays = kept
	r = readview.PageQueue(r, after, limit, o.cfg.Now())
	if r.QueuedJobs == nil {
		r.QueuedJobs = []api.QueuedJob{}
	}
	return r, nil
}
