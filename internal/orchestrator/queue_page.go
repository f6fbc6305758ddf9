package orchestrator

import (
	"sync"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/readview"
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

// queueCache is the last queue view Queue computed and the generation
// (viewGen) it was computed at: until the next commit or cycle, readers
// share it instead of ordering every queued job again (at 100,000 queued
// jobs, ordering them costs hundreds of milliseconds; a page of 500 from
// the cache, a few).
type queueCache struct {
	mu         sync.Mutex
	valid      bool
	gen        uint64
	r          api.QueueResponse
	refreshing bool // a goroutine computes the next view
	// stats are the last statistics computed, served when a cycle holds
	// the write lock (statsNow).
	stats    api.QueueStatistics
	hasStats bool
	// syncMax is SyncQueueView unless a test sets it.
	syncMax int
}

// SyncQueueView is the most queued jobs for which a reader computes a
// stale queue view itself. Beyond it, readers get the last view computed
// while one goroutine computes the next: at 100,000 queued jobs a view
// costs about a second of CPU, and the queue changes at every cycle.
const SyncQueueView = 10000

// queueView is Queue, from the cache when nothing changed since it was
// computed (or, past SyncQueueView queued jobs, while the next view is
// being computed); the times that depend on now (waits, statistics) are
// fresh. The rows are shared: callers copy what they change (readview.PageQueue
// does).
//
// Past SyncQueueView queued jobs a reader never waits for the
// orchestrator's lock, which a scheduling cycle holds while it decides and
// commits: the generation and the queue's size are atomics, the view is
// the cached one, and the statistics are computed if the lock is free at
// once, else the last ones computed (a cycle old at most).
func (o *Orchestrator) queueView() api.QueueResponse {
	gen, queued := o.views.gen.Load(), int(o.views.queued.Load())
	o.views.queue.mu.Lock()
	defer o.views.queue.mu.Unlock()
	syncMax := SyncQueueView
	if o.views.queue.syncMax > 0 {
		syncMax = o.views.queue.syncMax
	}
	if !o.views.queue.valid || (o.views.queue.gen != gen && queued <= syncMax) {
		o.views.queue.r, o.views.queue.gen, o.views.queue.valid = o.Queue(), gen, true
		o.views.queue.stats, o.views.queue.hasStats = o.views.queue.r.Statistics, true
		return o.views.queue.r
	}
	if o.views.queue.gen != gen && !o.views.queue.refreshing {
		o.views.queue.refreshing = true
		go func() {
			r := o.Queue()
			o.views.queue.mu.Lock()
			o.views.queue.r, o.views.queue.gen, o.views.queue.refreshing = r, gen, false
			o.views.queue.stats, o.views.queue.hasStats = r.Statistics, true
			o.views.queue.mu.Unlock()
		}()
	}
	r := o.views.queue.r
	r.Statistics = o.statsNow()
	r.NextCursor = ""
	return r
}

// statsNow is Statistics if the read lock can be had at once, else the
// last statistics computed. qcache.mu held.
func (o *Orchestrator) statsNow() api.QueueStatistics {
	if o.mu.TryRLock() {
		s := o.statistics(o.cfg.Now())
		o.mu.RUnlock()
		o.views.queue.stats, o.views.queue.hasStats = s, true
		return s
	}
	if o.views.queue.hasStats {
		return o.views.queue.stats
	}
	return o.Statistics() // none yet: wait for the lock once
}
