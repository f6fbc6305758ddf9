package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// Benchmarks of the store: what one durable commit costs (each Commit is
// one fsynced transaction), how that cost spreads over a group commit, and
// how long start-up takes to read a big store. Figures: docs/benchmarks.md.

// submission is the batch one submission adds: the job row, its queued
// event and its idempotency key.
func submission(b *Batch, i int, at time.Time) {
	id := fmt.Sprintf("j%020d", i)
	j := api.Job{ID: id, Name: "bench", User: "ana", Project: "vision", Command: "true", GPUCount: 1, Nodes: 1,
		State: api.StateQueued, Priority: api.PriorityNormal, SubmittedAt: at}
	b.Jobs = append(b.Jobs, j)
	b.Events = append(b.Events, JobEvent{id, api.Event{At: at, To: api.StateQueued, Reason: api.ReasonSubmitted}})
	if b.Idempotency == nil {
		b.Idempotency = map[string]string{}
	}
	b.Idempotency[fmt.Sprintf("ana/key-%d", i)] = id
}

func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "corral.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkCommit: one Commit of `jobs` submissions. ns/op is the cost of
// one durable transaction; jobs/s is what a group commit of that size
// sustains from one writer.
func BenchmarkCommit(b *testing.B) {
	benchCommits(b, []int{1, 16, 64, 512}, submission)
}

// benchCommits runs one sub-benchmark per batch size, each committing
// batches of that many submissions made by add.
func benchCommits(b *testing.B, sizes []int, add func(b *Batch, i int, at time.Time)) {
	for _, jobs := range sizes {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			s := openBench(b)
			ctx := context.Background()
			at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
			n := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var batch Batch
				for range jobs {
					add(&batch, n, at)
					n++
				}
				if err := s.Commit(ctx, &batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkCommitParallel: many goroutines each committing their own
// one-submission batch at once. The store's group commit (group.go) puts
// the batches waiting at one moment in one transaction with one fsync:
// compare with BenchmarkCommit/jobs=1, one fsync per submission.
func BenchmarkCommitParallel(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	var n atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var batch Batch
			submission(&batch, int(n.Add(1)), at)
			if err := s.Commit(ctx, &batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkLoad: reading a store of 100,000 finished jobs (each with its
// four events) at start-up.
func BenchmarkLoad(b *testing.B) {
	const jobs = 100000
	s := openBench(b)
	ctx := context.Background()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for i := 0; i < jobs; i += 5000 {
		var batch Batch
		for k := i; k < i+5000; k++ {
			submission(&batch, k, at)
			j := &batch.Jobs[len(batch.Jobs)-1]
			start, end, code := at.Add(time.Second), at.Add(time.Minute), 0
			j.State, j.StartedAt, j.FinishedAt, j.ExitCode = api.StateCompleted, &start, &end, &code
			j.Allocation = []api.Allocation{{NodeID: "node-1", GPUID: k % 8, GPUUUID: "GPU-1", MemoryGB: 80}}
			for _, e := range []api.Event{
				{At: start, From: api.StateQueued, To: api.StateScheduled, Reason: "scheduled"},
				{At: start, From: api.StateScheduled, To: api.StateRunning, Reason: api.ReasonStarted},
				{At: end, From: api.StateRunning, To: api.StateCompleted, Reason: api.ReasonExited},
			} {
				batch.Events = append(batch.Events, JobEvent{j.ID, e})
			}
		}
		if err := s.Commit(ctx, &batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		st, err := s.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Jobs) != jobs || len(st.Jobs[jobs-1].Events) != 4 {
			b.Fatalf("loaded %d jobs", len(st.Jobs))
		}
	}
	b.ReportMetric(float64(jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// auditedSubmission is a submission as the API makes it: the job, its
// event, its idempotency key and its audit entry.
func auditedSubmission(b *Batch, i int, at time.Time) {
	submission(b, i, at)
	id := b.Jobs[len(b.Jobs)-1].ID
	b.Audit = append(b.Audit, api.AuditEntry{At: at, User: "ana", Role: "user", TokenID: "t0123456789", Action: "job.submit", Method: "POST", Path: "/queue/submit",
		Target: id, Remote: "127.0.0.1:40000", Status: 201, RequestID: fmt.Sprintf("r%020d", i)})
}

// BenchmarkCommitAudited: like BenchmarkCommit, with each submission's
// audit entry in the batch, as POST /queue/submit writes it.
func BenchmarkCommitAudited(b *testing.B) {
	benchCommits(b, []int{1, 16, 64}, auditedSubmission)
}
