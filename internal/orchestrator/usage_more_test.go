package orchestrator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/spend"
	"github.com/corral-sched/corral/internal/notify"
	"github.com/corral-sched/corral/internal/store"
	"github.com/corral-sched/corral/internal/usage"
)

// planRecorder is a Notifier that keeps the events it is asked to plan.
type planRecorder struct {
	mu  sync.Mutex
	evs []notify.Event
}

func (p *planRecorder) Plan(evs []notify.Event) []store.OutboxItem {
	p.mu.Lock()
	p.evs = append(p.evs, evs...)
	p.mu.Unlock()
	return nil
}
func (p *planRecorder) Kick() {}

func (p *planRecorder) budgetKinds() []notify.Kind {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []notify.Kind
	for _, e := range p.evs {
		if e.Budget != nil {
			out = append(out, e.Kind)
		}
	}
	return out
}

// A budget tells 50%, 80% and 100% once each, as usage crosses them, and
// not again after a restart.
func TestBudgetNotifiesEachThresholdOnce(t *testing.T) {
	rec := &planRecorder{}
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Notify: rec})
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Spend.SetBudget(ctx, usage.Budget{Kind: "user", Name: "ana", GPUHours: 100.0 / 3600}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().UTC()
	steps := []struct {
		run  time.Duration // on 2 GPUs
		want []notify.Kind
	}{
		{30 * time.Second, []notify.Kind{notify.Budget50}},                                    // 60%
		{15 * time.Second, []notify.Kind{notify.Budget50, notify.Budget80}},                   // 90%
		{10 * time.Second, []notify.Kind{notify.Budget50, notify.Budget80, notify.Budget100}}, // 110%
		{10 * time.Second, []notify.Kind{notify.Budget50, notify.Budget80, notify.Budget100}}, // 130%: nothing new
	}
	for i, st := range steps {
		j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), User: "ana"})
		h.nextStart()
		h.runFor(j.ID, end.Add(-st.run), end, 0)
		h.waitState(j.ID, api.StateCompleted)
		if got := rec.budgetKinds(); !equalKinds(got, st.want) {
			t.Fatalf("step %d: budget notifications %v, want %v", i, got, st.want)
		}
	}
	h.stop()
	h.stop = nil
	rec2 := &planRecorder{}
	h2 := startConfig(t, h.path, Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Notify: rec2})
	j := h2.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), User: "ana"})
	h2.nextStart()
	h2.runFor(j.ID, end.Add(-time.Second), end, 0)
	h2.waitState(j.ID, api.StateCompleted)
	if got := rec2.budgetKinds(); len(got) != 0 {
		t.Fatalf("after a restart: %v told again", got)
	}
	if b := h2.o.FeatureOps().Spend.Budgets(); len(b) != 1 || b[0].Notified != 100 || !near(b[0].UsedGPUHours*3600, 2*66) {
		t.Fatalf("budget after restart: %+v", b)
	}
}

func equalKinds(a, b []notify.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// GPU utilization readings over an attempt become its used GPU-seconds:
// 50% on 2 GPUs for 10 seconds is 10 used GPU-seconds.
func TestUsageIntegratesUtilization(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), User: "ana"})
	task := h.nextStart()
	t0 := time.Now().UTC()
	read := func(at time.Time, util int) {
		var rs []api.GPUReading
		for i := range 8 {
			u := 0
			for _, g := range task.GPUs {
				if g == i {
					u = util
				}
			}
			rs = append(rs, api.GPUReading{Index: i, Utilization: u})
		}
		h.o.NodeSeen("n1", rs, nil, at)
	}
	read(t0, 50)
	read(t0.Add(10*time.Second), 50)
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.o.mu.RLock()
		used := h.o.spend.Used(j.ID, "n1")
		h.o.mu.RUnlock()
		if near(used, 10) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("used %v GPU-seconds, want 10", used)
		}
		<-h.o.Changed()
	}
	h.runFor(j.ID, t0, t0.Add(20*time.Second), 0)
	h.waitState(j.ID, api.StateCompleted)
	rep, err := h.o.FeatureOps().Spend.Usage(ctx, spend.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || !near(rep.Rows[0].GPUSeconds, 40) || !near(rep.Rows[0].UsedGPUSeconds, 10) || !near(rep.Rows[0].Efficiency, 0.25) {
		t.Fatalf("report %+v", rep.Rows)
	}
}

// A hold's GPU time is a ledger row of kind hold.
func TestUsageChargesHolds(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Holds.Hold(ctx, api.AllocateRequest{JobID: "nb", GPUCount: 2}, "ana"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.o.FeatureOps().Holds.Release(ctx, "nb"); err != nil {
		t.Fatal(err)
	}
	recs, _ := h.o.cfg.Store.UsageRecords(ctx, time.Time{}, time.Time{})
	if len(recs) != 1 || recs[0].Kind != usage.KindHold || recs[0].GPUs != 2 || recs[0].User != "ana" || recs[0].Ended != "released" {
		t.Fatalf("records %+v", recs)
	}
}

// A budget's month ends: its hold lifts by itself at the first instant of
// the next month (UTC), and the new month counts from zero.
func TestBudgetHoldEndsWithTheMonth(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)}
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, Now: clk.now})
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Spend.SetBudget(ctx, usage.Budget{Kind: "project", Name: "vision", Dollars: 1, Action: usage.ActionHold}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.o.FeatureOps().Spend.SetPrice(ctx, "H100", 36); err != nil { // 100 GPU-seconds: $1
		t.Fatal(err)
	}
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), User: "ana", Project: "vision"})
	h.nextStart()
	h.runFor(j.ID, clk.now().Add(-time.Minute), clk.now(), 0) // 120 GPU-seconds: $1.20
	h.waitState(j.ID, api.StateCompleted)
	if b := h.o.FeatureOps().Spend.Budgets(); len(b) != 1 || !b[0].Exhausted || !near(b[0].UsedDollars, 1.2) || b[0].Period != "2026-11" {
		t.Fatalf("budget in November: %+v", b)
	}
	held := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), User: "bo", Project: "vision"})
	h.noStart()
	clk.add(time.Hour) // December
	h.waitCycle()
	if task := h.nextStart(); task.JobID != held.ID {
		t.Fatalf("started %s in December, want %s", task.JobID, held.ID)
	}
	if b := h.o.FeatureOps().Spend.Budgets(); b[0].Exhausted || b[0].UsedDollars != 0 || b[0].Period != "2026-12" {
		t.Fatalf("budget in December: %+v", b)
	}
}

// A booking's idle time is charged to its booker as booking_idle rows,
// split over its nodes by GPUs, once per occurrence.
func TestUsageChargesIdleBookings(t *testing.T) {
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8), simNode("n2", 8)}, Tick: time.Hour})
	ctx := context.Background()
	start := time.Now().UTC().Add(-2 * time.Hour)
	r := &api.Reservation{Name: "deadline", GPUs: 3, Owner: "ana", Project: "vision", Start: start, End: start.Add(time.Hour),
		Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}, {NodeID: "n1", GPUID: 1}, {NodeID: "n2", GPUID: 0}}}
	for range 2 {
		if _, err := h.o.do(ctx, func(tx *txn) (any, error) { h.o.spend.ChargeBookingIdle(tx, r, 3*3600); return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	rep, _ := h.o.FeatureOps().Spend.Usage(ctx, spend.Query{By: usage.ByNode})
	if len(rep.Rows) != 2 || !near(rep.Rows[0].GPUSeconds, 7200) || rep.Rows[0].Key != "n1" || !near(rep.Total.GPUSeconds, 3*3600) {
		t.Fatalf("idle booking by node: %+v", rep.Rows)
	}
}

// Running attempts count in budgets: a long job that passes its project's
// budget holds the project's queued jobs and is told at the next tick,
// before it ends; when it ends, the ledger takes over, counting it once.
func TestBudgetCountsRunningAttempts(t *testing.T) {
	rec := &planRecorder{}
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: 20 * time.Millisecond, Notify: rec})
	ctx := context.Background()
	if _, err := h.o.FeatureOps().Spend.SetBudget(ctx, usage.Budget{Kind: "project", Name: "vision", GPUHours: 100.0 / 3600, Action: usage.ActionHold}); err != nil {
		t.Fatal(err)
	}
	long := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(2), User: "ana", Project: "vision"})
	h.nextStart()
	started := time.Now().UTC().Add(-time.Minute) // 120 GPU-seconds so far
	h.o.Sink(exec.Update{JobID: long.ID, Kind: exec.Started, At: started})
	h.waitState(long.ID, api.StateRunning)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b := h.o.FeatureOps().Spend.Budgets()
		if len(b) == 1 && b[0].Exhausted && b[0].Notified == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget with a long job running: %+v", b)
		}
		<-h.o.Changed()
	}
	held := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), User: "bo", Project: "vision"})
	h.noStart()
	if v, _ := h.o.Job(held.ID); v.PendingReason != usage.ReasonBudgetExhausted {
		t.Fatalf("held job: pending %q", v.PendingReason)
	}
	end := time.Now().UTC()
	h.o.Sink(exec.Update{JobID: long.ID, Kind: exec.Exited, At: end})
	h.waitState(long.ID, api.StateCompleted)
	want := 2 * end.Sub(started).Seconds()
	if b := h.o.FeatureOps().Spend.Budgets(); !near(b[0].UsedGPUHours*3600, want) {
		t.Fatalf("after the end: %v GPU-seconds, want %v (counted once)", b[0].UsedGPUHours*3600, want)
	}
	if got := rec.budgetKinds(); !equalKinds(got, []notify.Kind{notify.Budget50, notify.Budget80, notify.Budget100}) {
		t.Fatalf("notifications %v", got)
	}
}
