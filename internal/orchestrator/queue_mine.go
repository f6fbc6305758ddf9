package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/readview"
)

// QueuePageOf is QueuePage over one user's queued jobs: their rows in the
// queue's order, each with its place in the whole queue (QueuePosition),
// paged among that user's rows alone (the cursor counts their rows). The
// statistics are the whole queue's; the arrays are those of the rows
// kept (readview.OfUser). user "" is QueuePage.
func (o *Orchestrator) QueuePageOf(user string, limit int, cursor string) (api.QueueResponse, error) {
	if user == "" {
		return o.QueuePage(limit, cursor)
	}
	after, err := readview.Cursor(cursor)
	if err != nil {
		return api.QueueResponse{}, err
	}
	return readview.PageQueue(readview.OfUser(o.queueView(), user), after, limit, o.cfg.Now()), nil
}
