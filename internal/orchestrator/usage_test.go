package orchestrator

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/spend"
	"github.com/corral-sched/corral/internal/usage"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

// runFor starts the job's current attempt at start and ends it at end
// with the exit code.
func (h *harness) runFor(id string, start, end time.Time, code int) {
	h.t.Helper()
	j, _ := h.o.Job(id)
	h.o.Sink(exec.Update{JobID: id, Attempt: j.RetryCount, Kind: exec.Started, At: start})
	h.waitState(id, api.StateRunning)
	h.o.Sink(exec.Update{JobID: id, Attempt: j.RetryCount, Kind: exec.Exited, At: end, ExitCode: code})
}

// The usage report and the fair-share ledger count the same GPU-seconds:
// each user's and project's report total equals the (undecayed) ledger,
// and both equal GPUs x runtime summed over the jobs.
func TestUsageReportAgreesWithFairShareLedger(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	end := time.Now().UTC().Truncate(time.Second)
	jobs := []struct {
		user, project string
		gpus          int
		run           time.Duration
		code          int
		ended         string
	}{
		{"ana", "vision", 2, 100 * time.Second, 0, api.ReasonExited},
		{"bo", "nlp", 3, 40 * time.Second, 1, api.ReasonExitCode},
		{"ana", "nlp", 1, 250 * time.Second, 0, api.ReasonExited},
	}
	want := map[string]float64{}
	ids := map[string]string{}
	for _, c := range jobs {
		j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(c.gpus), User: c.user, Project: c.project})
		h.nextStart()
		h.runFor(j.ID, end.Add(-c.run), end, c.code)
		done := h.waitState(j.ID, map[int]api.State{0: api.StateCompleted, 1: api.StateFailed}[c.code])
		gs := float64(c.gpus) * c.run.Seconds()
		if !near(done.GPUSeconds, gs) {
			t.Fatalf("job %s: %v gpu-seconds, want %v", j.ID, done.GPUSeconds, gs)
		}
		want["user/"+c.user] += gs
		want["project/"+c.project] += gs
		ids[j.ID] = c.ended
	}
	for _, by := range []string{usage.ByUser, usage.ByProject} {
		rep, err := h.o.FeatureOps().Spend.Usage(ctx, spend.Query{By: by})
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rep.Rows {
			h.o.mu.RLock()
			ledger := h.o.ledger.UserUsage(row.Key, end)
			if by == usage.ByProject {
				ledger = h.o.ledger.ProjectUsage(row.Key, end)
			}
			h.o.mu.RUnlock()
			if !near(row.GPUSeconds, want[by+"/"+row.Key]) || !near(row.GPUSeconds, ledger) {
				t.Errorf("%s %s: report %v, ledger %v, jobs %v", by, row.Key, row.GPUSeconds, ledger, want[by+"/"+row.Key])
			}
		}
		if len(rep.Rows) != 2 {
			t.Errorf("by %s: %d rows, want 2", by, len(rep.Rows))
		}
	}
	recs, err := h.o.cfg.Store.UsageRecords(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(jobs) {
		t.Fatalf("%d records, want %d", len(recs), len(jobs))
	}
	for _, r := range recs {
		if r.Ended != ids[r.ID] || r.Node != "n1" || r.Kind != usage.KindJob || r.GPUModel != "H100" {
			t.Errorf("record %+v, want ended %s on n1", r, ids[r.ID])
		}
	}
	// A user sees only their own usage.
	rep, _ := h.o.FeatureOps().Spend.Usage(ctx, spend.Query{User: "bo"})
	if len(rep.Rows) != 1 || rep.Rows[0].Key != "bo" {
		t.Fatalf("bo's view: %+v", rep.Rows)
	}
	if _, err := h.o.FeatureOps().Spend.Usage(ctx, spend.Query{By: "color"}); err == nil {
		t.Fatal("by=color was accepted")
	}
}

// An attempt lost with the server is charged up to the last heartbeat,
// once: to the job, the ledger and the report alike.
func TestUsageChargesCrashLostAttempts(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(4), User: "ana", Project: "vision", MaxRetries: 1})
	h.nextStart()
	started := time.Now().UTC().Add(-time.Minute)
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: started})
	h.waitState(j.ID, api.StateRunning)
	h.o.heartbeat(ctx)
	h.o.mu.RLock()
	alive := h.o.spend.AliveAt()
	h.o.mu.RUnlock()
	h.stop()
	h.stop = nil

	h2 := start(t, h.path, nil)
	lost, _ := h2.o.Job(j.ID)
	want := 4 * alive.Sub(started).Seconds()
	if !near(lost.GPUSeconds, want) || lost.RetryCount != 1 {
		t.Fatalf("lost job: %v gpu-seconds (retry %d), want %v", lost.GPUSeconds, lost.RetryCount, want)
	}
	recs, _ := h2.o.cfg.Store.UsageRecords(ctx, time.Time{}, time.Time{})
	if len(recs) != 1 || recs[0].Ended != api.ReasonLost || !recs[0].End.Equal(alive) || !near(recs[0].GPUSeconds, want) {
		t.Fatalf("records %+v, want one lost attempt ending at %s", recs, alive)
	}
	at := lost.Events[len(lost.Events)-1].At
	h2.o.mu.RLock()
	ledger := h2.o.ledger.UserUsage("ana", at)
	h2.o.mu.RUnlock()
	rep, _ := h2.o.FeatureOps().Spend.Usage(ctx, spend.Query{})
	if !near(ledger, want) || !near(rep.Total.GPUSeconds, want) {
		t.Fatalf("ledger %v, report %v, want %v", ledger, rep.Total.GPUSeconds, want)
	}
	// A second restart charges nothing more.
	h2.stop()
	h2.stop = nil
	h3 := start(t, h.path, nil)
	rep, _ = h3.o.FeatureOps().Spend.Usage(ctx, spend.Query{})
	if !near(rep.Total.GPUSeconds, want) || rep.Total.Records != 1 {
		t.Fatalf("after a second restart: %+v", rep.Total)
	}
}

// A budget at 100% with action hold keeps its user's queued jobs waiting
// (budget_exhausted) until an admin releases it; others' jobs run.
func TestBudgetHold(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Spend.SetBudget(ctx, usage.Budget{Kind: "user", Name: "ana", GPUHours: 0.01, Action: usage.ActionHold}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.o.FeatureOps().Spend.SetBudget(ctx, usage.Budget{Kind: "user", Name: "ana", Action: "hold"}); err == nil {
		t.Fatal("a budget with no limit was accepted")
	}
	end := time.Now().UTC()
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), User: "ana"})
	h.nextStart()
	h.runFor(j.ID, end.Add(-time.Minute), end, 0) // 120 GPU-seconds > 36
	h.waitState(j.ID, api.StateCompleted)
	st := h.o.FeatureOps().Spend.Budgets()
	if len(st) != 1 || !st[0].Exhausted || st[0].Notified != 100 || st[0].EffectiveAction != usage.ActionHold {
		t.Fatalf("budgets %+v", st)
	}
	held := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), User: "ana"})
	other := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), User: "bo"})
	if task := h.nextStart(); task.JobID != other.ID {
		t.Fatalf("started %s, want bo's %s", task.JobID, other.ID)
	}
	h.noStart()
	if v, _ := h.o.Job(held.ID); v.PendingReason != usage.ReasonBudgetExhausted {
		t.Fatalf("held job: pending %q (%s)", v.PendingReason, v.PendingMessage)
	}
	if _, err := h.o.FeatureOps().Spend.ReleaseBudget(ctx, "user", "ana"); err != nil {
		t.Fatal(err)
	}
	if task := h.nextStart(); task.JobID != held.ID {
		t.Fatalf("started %s after the release, want %s", task.JobID, held.ID)
	}
}

// With action preemptible, an exhausted budget's new jobs are batch work
// at the lowest priority.
func TestBudgetPreemptible(t *testing.T) {
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, BudgetAction: usage.ActionPreemptible})
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Spend.SetBudget(ctx, usage.Budget{Kind: "project", Name: "vision", GPUHours: 0.01}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().UTC()
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), User: "ana", Project: "vision"})
	h.nextStart()
	h.runFor(j.ID, end.Add(-time.Minute), end, 0)
	h.waitState(j.ID, api.StateCompleted)
	next := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), User: "ana", Project: "vision", Priority: api.RawValue(`"high"`)})
	if next.Priority != api.PriorityLow || next.Class != api.ClassPreemptible {
		t.Fatalf("job after the budget: priority %v class %q", next.Priority, next.Class)
	}
}
