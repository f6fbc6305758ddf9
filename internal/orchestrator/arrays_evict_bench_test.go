package orchestrator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/arrays"
	"github.com/corral-sched/corral/internal/feature/ended"
	"github.com/corral-sched/corral/internal/store"
)

// BenchmarkRestartDoneArrays: a restart over a store holding 50 done
// arrays of 2,000 tasks each (every task completed, with its three
// events), and one array not done: the store's start-up load, then the
// whole New (load, recovery, books, ledger), and the heap in use after a
// collection with the orchestrator alive (docs/benchmarks.md, "Done
// arrays out of memory").
func BenchmarkRestartDoneArrays(b *testing.B) {
	const nArrays, tasks = 50, 2000
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "corral.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for a := range nArrays + 1 {
		aid := fmt.Sprintf("j01arr%020d", a)
		tmpl := api.Job{User: fmt.Sprintf("user%d", a%10), Project: "sweeps", Command: "python train.py --seed $CORRAL_ARRAY_TASK_ID",
			GPUCount: 1, Nodes: 1, Priority: api.PriorityNormal, SubmittedAt: at, Env: map[string]string{"WANDB_PROJECT": "sweep"}}
		rec := store.ArrayRecord{Template: tmpl, Array: api.Array{ID: aid, User: tmpl.User, Project: tmpl.Project, Array: "0-1999",
			TaskCount: tasks, TaskMax: tasks - 1, GPUCount: 1, Nodes: 1, Priority: api.PriorityNormal, Command: tmpl.Command, SubmittedAt: at}}
		var batch store.Batch
		done := a < nArrays // the last array keeps its last task queued (no row)
		for i := range tasks {
			rec.Array.Tasks = append(rec.Array.Tasks, i)
			if !done && i == tasks-1 {
				break
			}
			var j api.Job
			arrays.NewTask(&tmpl, &j, aid, &rec.Array.Tasks[i])
			start, end, code := at.Add(time.Minute), at.Add(time.Duration(2+i%60)*time.Minute), 0
			j.State, j.StartedAt, j.FinishedAt, j.ExitCode, j.GPUSeconds = api.StateCompleted, &start, &end, &code, end.Sub(start).Seconds()
			j.Allocation = []api.Allocation{{NodeID: "node-1", GPUID: i % 8, GPUUUID: "GPU-1", MemoryGB: 80}}
			j.Events = nil
			for _, e := range []api.Event{
				{At: start, From: api.StateQueued, To: api.StateScheduled, Reason: "scheduled"},
				{At: start, From: api.StateScheduled, To: api.StateRunning, Reason: api.ReasonStarted},
				{At: end, From: api.StateRunning, To: api.StateCompleted, Reason: api.ReasonExited},
			} {
				batch.Events = append(batch.Events, store.JobEvent{JobID: j.ID, Event: e})
			}
			batch.Jobs = append(batch.Jobs, j)
			if done {
				batch.Ended = append(batch.Ended, ended.Row(&j, end))
				rec.Finished = later(rec.Finished, end)
			}
		}
		batch.Arrays = []store.ArrayRecord{rec}
		if err := st.Commit(ctx, &batch); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var load, start time.Duration
	var heap uint64
	loaded, live := 0, 0
	b.ResetTimer()
	for range b.N {
		st, err := store.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		s, err := st.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		load += time.Since(t0)
		loaded = len(s.Jobs)
		s = nil
		runtime.GC()
		t0 = time.Now()
		o, err := New(ctx, Config{Store: st, Executor: nopExec{}, Nodes: []Node{simNode("n1", 8)}, DataDir: b.TempDir(), Tick: time.Hour, Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		start += time.Since(t0)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap += ms.HeapInuse
		live = o.jobs.Len()
		runtime.KeepAlive(o)
		st.Close()
	}
	b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "ms-load")
	b.ReportMetric(float64(start.Milliseconds())/float64(b.N), "ms-new")
	b.ReportMetric(float64(heap)/float64(b.N)/(1<<20), "MiB-heap")
	b.ReportMetric(float64(loaded), "jobs-loaded")
	b.ReportMetric(float64(live), "jobs-in-memory")
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
