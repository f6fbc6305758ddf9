package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// TestSlowReadDoesNotStallTheLoop: a GET /jobs whose store query is slow
// (held open here by the read hook) used to hold the orchestrator's read
// lock across the query, so the loop waited for the write lock and
// submissions and agent reports waited behind it (issue 24: 97 s on a
// 505 MB store, and a running job failed node_lost). Now both go through
// while the query is held, and a job that ended meanwhile is listed once,
// in its new state.
func TestSlowReadDoesNotStallTheLoop(t *testing.T) {
	for name, f := range map[string]JobFilter{
		"every state":  {},
		"completed":    {State: api.StateCompleted},
		"by user":      {User: "alice"},
		"small page":   {Limit: 2},
		"after cursor": {Cursor: "jzzzzzzzzzzzzzzzzzzzzzzzzz"},
	} {
		t.Run(name, func(t *testing.T) {
			h := start(t, "", nil)
			ctx := context.Background()
			a := h.submit(api.SubmitRequest{Command: "a", User: "alice", GPUCount: gpus(1)})
			task := h.nextStart()
			h.o.Sink(exec.Update{JobID: task.JobID, Attempt: task.Attempt, Kind: exec.Started, At: time.Now(), PID: 1})
			h.waitState(a.ID, api.StateRunning)

			entered, release := make(chan struct{}), make(chan struct{})
			h.o.readHook = func(what string) {
				if what == "jobs" {
					close(entered)
					<-release
				}
			}
			type page struct {
				jobs []api.Job
				err  error
			}
			got := make(chan page, 1)
			go func() {
				jobs, _, err := h.o.JobPage(ctx, f)
				got <- page{jobs, err}
			}()
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("the page never read the store")
			}
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()

			// While the query is held: a submission is acknowledged, and
			// an agent's report is applied.
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, _, err := h.o.Submit(sctx, api.SubmitRequest{Command: "b", User: "bob", GPUCount: gpus(1)}, ""); err != nil {
				t.Fatalf("submission while a read is held: %v", err)
			}
			h.o.Sink(exec.Update{JobID: task.JobID, Attempt: task.Attempt, Kind: exec.Exited, At: time.Now()})
			h.waitState(a.ID, api.StateCompleted)

			close(release)
			p := <-got
			if p.err != nil {
				t.Fatal(p.err)
			}
			seen := 0
			for _, j := range p.jobs {
				if j.ID == a.ID {
					seen++
					if j.State != api.StateCompleted && j.State != api.StateRunning {
						t.Errorf("job %s listed as %s", j.ID, j.State)
					}
				}
			}
			if seen != 1 {
				t.Errorf("job %s listed %d times, want once: %v", a.ID, seen, p.jobs)
			}
		})
	}
}
