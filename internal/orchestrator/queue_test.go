package orchestrator

import (
	"context"
	"sync"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// Readers list the queue (and, with scheduling stopped, order it
// themselves) while jobs are submitted: run with -race.
func TestQueueReadersWhileSubmitting(t *testing.T) {
	h := start(t, "", nil)
	if _, err := h.o.SetScheduling(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
					h.o.Queue()
				}
			}
		})
	}
	const n = 50
	for range n {
		h.submit(api.SubmitRequest{Command: "true", GPUCount: gpus(1)})
	}
	close(done)
	readers.Wait()
	q := h.o.Queue()
	if len(q.QueuedJobs) != n {
		t.Fatalf("%d queued, want %d", len(q.QueuedJobs), n)
	}
	for i, j := range q.QueuedJobs {
		if j.QueuePosition != i+1 {
			t.Errorf("job %d at position %d", i, j.QueuePosition)
		}
	}
}
