package orchestrator

import (
	"strconv"

	"github.com/corral-sched/corral/internal/api"
)

// DefaultQueuePage is how many queued jobs GET /queue returns when the
// request names no limit.
const DefaultQueuePage = 500

// DashboardQueueRows is how many queued jobs each dashboard update
// (GET /events) carries: the head of the queue; its statistics count
// them all.
const DashboardQueueRows = 500

// QueuePage is GET /queue a page at a time: the queued jobs after the
// first cursor of them ("" or "0": from the head), at most limit of them,
// in the order they will be considered, and the next page's cursor when
// more follow. Statistics and arrays are always complete. The queue's
// order moves as it changes, so a job may appear on two pages, or none,
// when the queue changed between them.
func (o *Orchestrator) QueuePage(limit int, cursor string) (api.QueueResponse, error) {
	after := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return api.QueueResponse{}, api.Invalid("cursor", "is not a cursor this server gave (next_cursor)")
		}
		after = n
	}
	return pageQueue(o.Queue(), after, limit), nil
}

// pageQueue keeps the rows of r after the first after, at most limit of
// them, and sets the next cursor.
func pageQueue(r api.QueueResponse, after, limit int) api.QueueResponse {
	rows := r.QueuedJobs[min(after, len(r.QueuedJobs)):]
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
		r.NextCursor = strconv.Itoa(after + limit)
	}
	r.QueuedJobs = rows
	return r
}
