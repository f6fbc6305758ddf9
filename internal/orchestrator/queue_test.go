package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// The snapshot's queue order is the queued jobs in id order, whatever
// order they were queued, requeued and taken out in; ids that left the
// queue are dropped, also when no cycle runs.
func TestQueueOrder(t *testing.T) {
	o := &Orchestrator{q: queueBooks{queued: map[string]bool{}, byUser: map[string]int{}, sorted: true}}
	set := func(id string, queued bool) { o.setQueued(&api.Job{ID: id, User: "ana"}, queued) }
	set("j1", true)
	set("j3", true)
	set("j2", true) // an older id, as a requeued job has
	set("j3", false)
	set("j3", true) // back while its old entry is still listed
	set("j1", false)
	set("j4", true)
	if got, want := ids(o.queueOrder()), []string{"j2", "j3", "j4"}; !slices.Equal(got, want) {
		t.Errorf("queue order %v, want %v", got, want)
	}
	if o.q.byUser["ana"] != 3 {
		t.Errorf("queued by ana: %d, want 3", o.q.byUser["ana"])
	}
	for i := range 10000 {
		id := fmt.Sprintf("k%05d", i)
		set(id, true)
		set(id, false)
	}
	if len(o.q.jobs) > 2*len(o.q.queued)+1024 {
		t.Errorf("%d jobs kept for %d queued ones", len(o.q.jobs), len(o.q.queued))
	}
	if got, want := ids(o.queueOrder()), []string{"j2", "j3", "j4"}; !slices.Equal(got, want) {
		t.Errorf("queue order %v, want %v", got, want)
	}
}

func ids(jobs []*api.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

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
