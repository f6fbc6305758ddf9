package viewcache

import (
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// fakeSource counts builds; each view it builds has as many rows as the
// builds so far, and statistics that say which build (100+), try (200+)
// or wait (300+) they came from. lockFree says whether TryStats gets the
// lock; refreshed is told when a background build is stored.
type fakeSource struct {
	mu                   sync.Mutex
	builds, tries, waits int
	lockFree             bool
	refreshed            chan struct{}
}

func (f *fakeSource) source() Source {
	return Source{
		Build: func() api.QueueResponse {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.builds++
			return api.QueueResponse{QueuedJobs: make([]api.QueuedJob, f.builds), Statistics: api.QueueStatistics{TotalQueued: 100 + f.builds}}
		},
		TryStats: func() (api.QueueStatistics, bool) {
			if !f.lockFree {
				return api.QueueStatistics{}, false
			}
			f.tries++
			return api.QueueStatistics{TotalQueued: 200 + f.tries}, true
		},
		Stats: func() api.QueueStatistics {
			f.waits++
			return api.QueueStatistics{TotalQueued: 300 + f.waits}
		},
		Refreshed: func() { f.refreshed <- struct{}{} },
	}
}

// wait waits for a background build to be stored; a refresh that never
// comes fails the test instead of hanging it.
func (f *fakeSource) wait(t *testing.T) {
	t.Helper()
	select {
	case <-f.refreshed:
	case <-time.After(10 * time.Second):
		t.Fatal("no view was built in the background")
	}
}

func TestQueueView(t *testing.T) {
	type call struct {
		gen      uint64
		queued   int
		lockFree bool
		rows     int  // the view's rows: which build it is
		total    int  // its statistics' TotalQueued: which build, try or wait
		refresh  bool // a build in the background follows
	}
	const many = SyncMax + 1
	tests := []struct {
		name  string
		calls []call
	}{
		{"the first view is built, even of a large queue", []call{{1, many, true, 1, 101, false}}},
		{"the same generation is shared, its statistics fresh", []call{{1, 5, true, 1, 101, false}, {1, 5, true, 1, 201, false}}},
		{"a new generation of a small queue is built", []call{{1, 5, true, 1, 101, false}, {2, 5, true, 2, 102, false}}},
		{"the lock taken: the last statistics", []call{{1, 5, true, 1, 101, false}, {1, 5, false, 1, 101, false}}},
		{"a large queue's stale view is served, the next built beside it", []call{
			{1, 5, true, 1, 101, false}, {2, many, false, 1, 101, true}, {2, many, false, 2, 102, false}}},
		{"each new generation of a large queue is refreshed beside", []call{
			{1, 5, true, 1, 101, false}, {2, many, true, 1, 201, true}, {3, many, true, 2, 202, true}, {3, many, true, 3, 203, false}}},
	}
	for _, tc := range tests {
		var c Queue
		f := &fakeSource{refreshed: make(chan struct{})}
		for i, k := range tc.calls {
			f.lockFree = k.lockFree
			r := c.View(k.gen, k.queued, f.source())
			if k.refresh {
				f.wait(t) // stored before the next call
			}
			if len(r.QueuedJobs) != k.rows || r.Statistics.TotalQueued != k.total {
				t.Errorf("%s: call %d: rows %d total %d; want %d %d", tc.name, i, len(r.QueuedJobs), r.Statistics.TotalQueued, k.rows, k.total)
			}
		}
	}
}

// TestQueueViewWaitsOnce: with no statistics computed yet and the lock
// taken, a reader of a cached view waits for them once.
func TestQueueViewWaitsOnce(t *testing.T) {
	c := Queue{valid: true} // a view whose statistics were never computed
	f := &fakeSource{}
	r := c.View(0, 5, f.source())
	if r.Statistics.TotalQueued != 301 || f.waits != 1 {
		t.Errorf("statistics %d after %d waits, want 301 after one", r.Statistics.TotalQueued, f.waits)
	}
}

func TestSetSyncMax(t *testing.T) {
	var c Queue
	c.SetSyncMax(1)
	f := &fakeSource{refreshed: make(chan struct{})}
	c.View(1, 2, f.source())
	r := c.View(2, 2, f.source()) // two queued count as many: stale, refreshed beside
	if len(r.QueuedJobs) != 1 {
		t.Fatalf("rows %d, want the stale view's 1", len(r.QueuedJobs))
	}
	f.wait(t)
	if f.builds != 2 {
		t.Errorf("rows %d after %d builds, want the stale view (1) and one refresh", len(r.QueuedJobs), f.builds)
	}
}
