package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestQueueViewWithoutTheLock: past SyncQueueView queued jobs, GET /queue
// answers from the cached view while a scheduling cycle holds the write
// lock (it used to wait for the whole cycle, commit included: the p99 of
// GET /queue at 100,000 queued jobs), with the last statistics computed.
func TestQueueViewWithoutTheLock(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	h.o.SetScheduling(ctx, false)
	for range 3 {
		h.submit(api.SubmitRequest{Command: "a", GPUCount: gpus(1)})
	}
	h.o.views.queue.SetSyncMax(1) // three queued jobs count as many
	first, err := h.o.QueuePage(500, "")
	if err != nil || len(first.QueuedJobs) != 3 || first.Statistics.TotalQueued != 3 {
		t.Fatalf("first page: %d jobs, %d queued, %v", len(first.QueuedJobs), first.Statistics.TotalQueued, err)
	}

	h.o.mu.Lock() // a cycle deciding and committing
	got := make(chan api.QueueResponse, 1)
	go func() {
		r, _ := h.o.QueuePage(500, "")
		got <- r
	}()
	select {
	case r := <-got:
		if len(r.QueuedJobs) != 3 || r.Statistics.TotalQueued != 3 {
			t.Errorf("page while the lock is held: %d jobs, %d queued", len(r.QueuedJobs), r.Statistics.TotalQueued)
		}
	case <-time.After(10 * time.Second):
		h.o.mu.Unlock()
		t.Fatal("GET /queue waited for the write lock")
	}
	h.o.mu.Unlock()
}
