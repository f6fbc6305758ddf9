package orchestrator

import (
	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/readview"
	"github.com/corral-sched/corral/internal/viewcache"
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
	after, err := readview.Cursor(cursor)
	if err != nil {
		return api.QueueResponse{}, err
	}
	return readview.PageQueue(o.queueView(), after, limit, o.cfg.Now()), nil
}

// queueCache is the last queue view computed (package viewcache), kept
// in the books' viewCache with the generation that dates it.
type queueCache = viewcache.Queue

// SyncQueueView is the most queued jobs for which a reader computes a
// stale queue view itself (viewcache.SyncMax).
const SyncQueueView = viewcache.SyncMax

// queueView is Queue from the cache (viewcache.Queue.View): computed
// afresh when nothing is cached or the books changed since, while the
// queue is small; past SyncQueueView queued jobs a reader never waits for
// the lock. The generation and the queue's size are atomics, read
// without the lock.
func (o *Orchestrator) queueView() api.QueueResponse {
	tryStats := func() (api.QueueStatistics, bool) { // Statistics, if the read lock can be had at once
		if !o.mu.TryRLock() {
			return api.QueueStatistics{}, false
		}
		defer o.mu.RUnlock()
		return o.statistics(o.cfg.Now()), true
	}
	return o.views.queue.View(o.views.gen.Load(), int(o.views.queued.Load()),
		viewcache.Source{Build: o.Queue, TryStats: tryStats, Stats: o.Statistics})
}
