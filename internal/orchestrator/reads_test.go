package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// TestSlowReadDoesNotStallTheLoop: a GET /jobs whose store query is slow
// (held open here by the read hook) used to hold the orchestrator's read
// lock across the query, so the loop waited for the write lock and
// submissions and agent reports waited behind it (once 97 s on a
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
			h.o.test.readHook = func(what string) {
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

// TestSlowStoreReadsWithoutTheLock: every reader that reads the store
// (one job, its state, owner and env, an id prefix, an array prefix, a
// page of jobs) does it without the orchestrator's lock: while the read
// is held open, a submission is acknowledged and an agent's report is
// applied.
func TestSlowStoreReadsWithoutTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.db")
	h := start(t, path, nil)
	ended := h.submit(api.SubmitRequest{Command: "e", User: "alice", GPUCount: gpus(1)})
	task := h.nextStart()
	h.o.Sink(exec.Update{JobID: task.JobID, Attempt: task.Attempt, Kind: exec.Started, At: time.Now(), PID: 1})
	h.o.Sink(exec.Update{JobID: task.JobID, Attempt: task.Attempt, Kind: exec.Exited, At: time.Now()})
	h.waitState(ended.ID, api.StateCompleted)
	h.stop()
	h.stop = nil
	h = start(t, path, nil) // the ended job is in the store only
	ctx := context.Background()

	cases := []struct {
		name string
		read func(o *Orchestrator) error
	}{
		{"job", func(o *Orchestrator) error { _, err := o.Job(ended.ID); return err }},
		{"job state", func(o *Orchestrator) error {
			if _, _, ok := o.JobState(ended.ID); !ok {
				return fmt.Errorf("no state")
			}
			return nil
		}},
		{"job owner", func(o *Orchestrator) error {
			if u, _, ok := o.JobOwner(ended.ID); !ok || u != "alice" {
				return fmt.Errorf("owner %q", u)
			}
			return nil
		}},
		{"job env", func(o *Orchestrator) error { o.JobEnv(ended.ID); return nil }},
		{"job prefix", func(o *Orchestrator) error {
			id, err := o.FeatureOps().Refs.JobID(ended.ID[:len(ended.ID)-1])
			if err == nil && id != ended.ID {
				err = fmt.Errorf("resolved to %s", id)
			}
			return err
		}},
		{"array prefix", func(o *Orchestrator) error {
			var e *api.Error
			if _, err := o.FeatureOps().Refs.ArrayID(ended.ID[:8]); !errors.As(err, &e) || e.Status != http.StatusNotFound {
				return fmt.Errorf("want a 404, got %v", err)
			}
			return nil
		}},
		{"jobs page", func(o *Orchestrator) error { _, _, err := o.JobPage(ctx, JobFilter{}); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			a := h.submit(api.SubmitRequest{Command: "a", User: "alice", GPUCount: gpus(1)})
			task := h.nextStart()
			for task.JobID != a.ID { // the last case's second job
				task = h.nextStart()
			}
			h.o.Sink(exec.Update{JobID: task.JobID, Attempt: task.Attempt, Kind: exec.Started, At: time.Now(), PID: 1})
			h.waitState(a.ID, api.StateRunning)

			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			h.o.test.readHook = func(string) { once.Do(func() { close(entered); <-release }) }
			got := make(chan error, 1)
			go func() { got <- c.read(h.o) }()
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("the read never read the store")
			}
			released := false
			defer func() {
				if !released {
					close(release)
					<-got
				}
			}()
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, _, err := h.o.Submit(sctx, api.SubmitRequest{Command: "b", User: "bob", GPUCount: gpus(0)}, ""); err != nil {
				t.Fatalf("submission while a read is held: %v", err)
			}
			h.o.Sink(exec.Update{JobID: task.JobID, Attempt: task.Attempt, Kind: exec.Exited, At: time.Now()})
			h.waitState(a.ID, api.StateCompleted)
			released = true
			close(release)
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		})
	}
}
