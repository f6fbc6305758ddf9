// Package viewcache keeps the last GET /queue view computed, so that
// readers share it until the books change instead of ordering every
// queued job again (at 100,000 queued jobs, ordering them costs hundreds
// of milliseconds; a page of 500 from the cache, a few). Its age is a
// generation the orchestrator bumps at each commit and cycle. It holds
// its own mutex and never the orchestrator's lock: what it computes, it
// asks of a Source.
package viewcache

import (
	"sync"

	"github.com/corral-sched/corral/internal/api"
)

// SyncMax is the most queued jobs for which a reader computes a stale
// queue view itself. Beyond it, readers get the last view computed while
// one goroutine computes the next: at 100,000 queued jobs a view costs
// about a second of CPU, and the queue changes at every cycle.
const SyncMax = 10000

// Source computes what the cache holds: the orchestrator.
type Source struct {
	// Build computes the queue's view afresh (it waits for the read lock).
	Build func() api.QueueResponse
	// TryStats computes the queue's statistics if the read lock can be
	// had at once; false when it cannot (a cycle holds the write lock).
	TryStats func() (api.QueueStatistics, bool)
	// Stats computes them, waiting for the lock.
	Stats func() api.QueueStatistics
	// Refreshed, when not nil, is called once a view built in the
	// background is stored (a test's signal).
	Refreshed func()
}

// Queue is the last queue view computed and the generation it was
// computed at. The zero value is an empty cache.
type Queue struct {
	mu         sync.Mutex
	valid      bool
	gen        uint64
	r          api.QueueResponse
	refreshing bool // a goroutine computes the next view
	// stats are the last statistics computed, served when the read lock
	// cannot be had at once.
	stats    api.QueueStatistics
	hasStats bool
	syncMax  int // SyncMax unless a test sets it
}

// SetSyncMax replaces SyncMax for this cache (tests: a few queued jobs
// count as many).
func (c *Queue) SetSyncMax(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncMax = n
}

// View is the queue's view at generation gen, with queued jobs queued:
// computed by src.Build when none is cached, or when it is stale and the
// queue is small (at most SyncMax); past SyncMax a stale view is served
// while one goroutine computes the next, so a reader never waits for the
// orchestrator's lock, which a scheduling cycle holds while it decides
// and commits. A cached view's statistics are computed anew when the
// lock can be had at once, else the last ones computed (a cycle old at
// most). The rows are shared: callers copy what they change
// (readview.PageQueue does).
func (c *Queue) View(gen uint64, queued int, src Source) api.QueueResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	syncMax := SyncMax
	if c.syncMax > 0 {
		syncMax = c.syncMax
	}
	if !c.valid || (c.gen != gen && queued <= syncMax) {
		c.r, c.gen, c.valid = src.Build(), gen, true
		c.stats, c.hasStats = c.r.Statistics, true
		return c.r
	}
	if c.gen != gen && !c.refreshing {
		c.refreshing = true
		go func() {
			r := src.Build()
			c.mu.Lock()
			c.r, c.gen, c.refreshing = r, gen, false
			c.stats, c.hasStats = r.Statistics, true
			c.mu.Unlock()
			if src.Refreshed != nil {
				src.Refreshed()
			}
		}()
	}
	r := c.r
	r.Statistics = c.statsNow(src)
	r.NextCursor = ""
	return r
}

// statsNow is the statistics now if the lock can be had at once, else
// the last ones computed, else (none yet) the statistics waited for once.
// c.mu held.
func (c *Queue) statsNow(src Source) api.QueueStatistics {
	if s, ok := src.TryStats(); ok {
		c.stats, c.hasStats = s, true
		return s
	}
	if c.hasStats {
		return c.stats
	}
	return src.Stats()
}
