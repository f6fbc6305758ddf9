package orchestrator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
	"github.com/corral-sched/corral/internal/store"
)

// BenchmarkCycleDependencies: one scheduling cycle (eligibility, snapshot,
// the core, the plan) over 10,000 queued 1-GPU jobs while a running job
// holds all 8 GPUs, so none starts and every cycle does the same work.
//
//   - deps=none: no job has dependencies: the baseline.
//   - deps=chain: job i is afterok on job i-1 (job 0 on the running job):
//     every job is held back, so the core sees none of them.
//   - deps=met: every job is afterok on a completed job: all are
//     evaluated, all go on to the core; the difference with none is the
//     cost of evaluating 10,000 dependencies.
//   - deps=array: every job is afterok on a 100-task array that has
//     completed (100 predecessors each): all go on to the core.
func BenchmarkCycleDependencies(b *testing.B) {
	for _, mode := range []string{"none", "chain", "met", "array"} {
		b.Run("deps="+mode, func(b *testing.B) {
			o := depBenchQueue(b, mode)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				o.cycle(ctx, nil)
			}
		})
	}
}

// BenchmarkDependencyPass: the dependency pass alone (what the cycle adds
// before the snapshot) over the same queues.
func BenchmarkDependencyPass(b *testing.B) {
	for _, mode := range []string{"none", "chain", "met", "array"} {
		b.Run("deps="+mode, func(b *testing.B) {
			o := depBenchQueue(b, mode)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				o.on.eligibleQueue(o.begin(), o.jobs.QueueOrder())
			}
		})
	}
}

// depBenchQueue is an orchestrator (not looping) with 10,000 queued
// 1-GPU jobs whose dependencies are as mode says, one running job on all
// 8 GPUs, and one cycle run (expressions parsed).
func depBenchQueue(b *testing.B, mode string) *Orchestrator {
	const queued = 10000
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "corral.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	o, err := New(ctx, Config{Store: st, Executor: nopExec{}, Nodes: []Node{simNode("n1", 8)}, DataDir: b.TempDir(),
		Tick: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	add := func(id string, state api.State) *api.Job {
		j := &api.Job{ID: id, User: "ana", Project: "default", Command: "true", GPUCount: 1, Nodes: 1, Priority: api.PriorityNormal,
			State: state, SubmittedAt: now, Allocation: []api.Allocation{}}
		o.jobs.Add(j)
		return j
	}
	blocker := add("jblocker", api.StateRunning)
	blocker.GPUCount, blocker.StartedAt = 8, &now
	blocker.Allocation = o.gpus.Allocate(blocker.ID, blocker.User, []sched.Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}})
	o.jobs.SetActive(blocker.ID, true)
	done := add("jdone", api.StateCompleted)
	done.FinishedAt = &now
	for i := range 100 { // an array in memory: its tasks decide
		t := add(fmt.Sprintf("jarr_%d", i), api.StateCompleted)
		t.ArrayJobID, t.ArrayTaskID, t.FinishedAt = "jarr", new(i), &now
	}
	o.arr.Load(&store.State{Arrays: []store.ArrayRecord{{Array: api.Array{ID: "jarr", User: "ana", Project: "default"}}}})
	prev := blocker.ID
	for i := range queued {
		j := add(fmt.Sprintf("jq%06d", i), api.StateQueued)
		switch mode {
		case "chain":
			j.DependsOn = "afterok:" + prev
		case "met":
			j.DependsOn = "afterok:" + done.ID
		case "array":
			j.DependsOn = "afterok:jarr"
		}
		o.jobs.SetQueued(j, true)
		prev = j.ID
	}
	o.dirty = true
	o.cycle(ctx, nil)
	if n := o.deps.Held(); (mode == "chain") != (n == queued) {
		b.Fatalf("%d jobs held back by dependencies", n)
	}
	return o
}
