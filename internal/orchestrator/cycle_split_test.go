package orchestrator

import (
	"context"
	"fmt"
	"testing"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// TestCycleDecidesWithoutTheLock: past splitMax queued jobs a cycle
// decides with the write lock free (a reader such as GET /jobs does not
// wait for the core), below it the lock is held across the decision (one
// commit for reports and starts); either way every job runs to the end,
// each started on GPUs no running job holds.
func TestCycleDecidesWithoutTheLock(t *testing.T) {
	tests := []struct {
		name     string
		splitMax int
		readable bool // a reader gets the lock while the core decides
	}{
		{"large queue: split", 1, true},
		{"small queue: one lock", 1000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, "", nil)
			ctx := context.Background()
			h.o.SetScheduling(ctx, false)
			var ids []string
			for i := range 12 { // 8 GPUs: 8 start, 4 wait
				ids = append(ids, h.submit(api.SubmitRequest{Command: fmt.Sprint("job ", i), GPUCount: gpus(1)}).ID)
			}
			readable := make(chan bool, 1)
			h.o.mu.Lock()
			h.o.test.splitMax = tc.splitMax
			h.o.test.deciding = func() {
				ok := h.o.mu.TryRLock()
				if ok {
					h.o.mu.RUnlock()
				}
				select {
				case readable <- ok: // the first cycle's
				default:
				}
			}
			h.o.mu.Unlock()
			h.waitCycle()
			if got := <-readable; got != tc.readable {
				t.Errorf("a reader could take the lock while the core decided: %v; want %v", got, tc.readable)
			}

			holder := map[int]string{} // GPU -> the running job on it
			claim := func(task exec.Task) {
				for _, g := range task.GPUs {
					if other, ok := holder[g]; ok {
						t.Fatalf("GPU %d given to %s while %s holds it", g, task.JobID, other)
					}
					holder[g] = task.JobID
				}
			}
			var running []exec.Task
			for range 8 {
				running = append(running, h.nextStart())
				claim(running[len(running)-1])
			}
			for waiting := 4; len(running) > 0; {
				task := running[0]
				running = running[1:]
				for _, g := range task.GPUs {
					delete(holder, g)
				}
				h.finish(task)
				if waiting > 0 { // one waiting job takes the GPU
					waiting--
					running = append(running, h.nextStart())
					claim(running[len(running)-1])
				}
			}
			for _, id := range ids {
				if j, err := h.o.Job(id); err != nil || j.State != api.StateCompleted {
					t.Errorf("job %s is %s (%v); want completed", id, j.State, err)
				}
			}
		})
	}
}
