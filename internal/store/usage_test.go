package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/usage"
)

// jobEnd is the batch one job's end adds: its row and its event, and with
// ledger true, its usage row (what the orchestrator now writes with it).
func jobEnd(ledger bool) func(b *Batch, i int, at time.Time) {
	return func(b *Batch, i int, at time.Time) {
		id := fmt.Sprintf("j%020d", i)
		start := at.Add(-time.Hour)
		j := api.Job{ID: id, Name: "bench", User: "ana", Project: "vision", Command: "true", GPUCount: 2, Nodes: 1,
			State: api.StateCompleted, Priority: api.PriorityNormal, SubmittedAt: start, StartedAt: &start, FinishedAt: &at}
		b.Jobs = append(b.Jobs, j)
		b.Events = append(b.Events, JobEvent{id, api.Event{At: at, From: api.StateRunning, To: api.StateCompleted, Reason: api.ReasonExited}})
		if ledger {
			b.Usage = append(b.Usage, usage.Record{Kind: usage.KindJob, ID: id, User: "ana", Project: "vision", GPUModel: "H100",
				Node: "n1", GPUs: 2, Start: start, End: at, GPUSeconds: 7200, Ended: api.ReasonExited})
		}
	}
}

// BenchmarkCommitJobEnds: the cost of the usage ledger on a commit of job
// ends: the same batches without (ledger=false, the baseline) and with
// their usage rows, in one run.
func BenchmarkCommitJobEnds(b *testing.B) {
	for _, ledger := range []bool{false, true} {
		b.Run(fmt.Sprintf("ledger=%v", ledger), func(b *testing.B) { benchCommits(b, []int{1, 64, 512}, jobEnd(ledger)) })
	}
}

// A usage row written twice (same kind, id, attempt, node) is one row;
// the window query returns rows that overlap it; the totals sum by user,
// project and model.
func TestUsageRowsUpsertAndQuery(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	r := usage.Record{Kind: usage.KindJob, ID: "j1", User: "ana", Project: "vision", GPUModel: "H100", Node: "n1", GPUs: 2,
		Start: t0, End: t0.Add(time.Hour), GPUSeconds: 7200, UsedGPUSeconds: 3600, Ended: "exited"}
	other := r
	other.ID, other.Start, other.End, other.GPUSeconds = "j2", t0.Add(5*time.Hour), t0.Add(6*time.Hour), 7200
	for range 2 {
		if err := s.Commit(ctx, &Batch{Usage: []usage.Record{r, other}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.UsageRecords(ctx, time.Time{}, time.Time{})
	if err != nil || len(all) != 2 || all[0] != r {
		t.Fatalf("records %+v (%v), want 2, the first %+v", all, err, r)
	}
	some, _ := s.UsageRecords(ctx, t0.Add(30*time.Minute), t0.Add(2*time.Hour))
	if len(some) != 1 || some[0].ID != "j1" {
		t.Fatalf("window: %+v", some)
	}
	tot, err := s.UsageTotals(ctx)
	if err != nil || len(tot) != 1 || tot[0].GPUSeconds != 14400 {
		t.Fatalf("totals %+v (%v)", tot, err)
	}
}
