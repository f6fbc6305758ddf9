package sched

import (
	"testing"
	"time"
)

// A held job (a budget's hold) never starts and waits with its reason and
// sentence; the job behind it starts, even with backfill off.
func TestHeldJobIsNotEligible(t *testing.T) {
	a := node("a", 8, "H100", 80)
	held := mk("held").gpus(2).build()
	held.Held, held.HeldNote = "budget_exhausted", "the budget is spent"
	next := mk("next").gpus(8).at(time.Minute).build()
	r := Schedule(Snapshot{Now: t0.Add(time.Hour), Nodes: []Node{a}, Queue: []Job{held, next}, Policy: Policy{Name: PolicyFCFS}})
	if len(r.Starts) != 1 || r.Starts[0].JobID != "next" {
		t.Fatalf("starts = %+v, want only the job behind the held one", r.Starts)
	}
	for _, p := range r.Pending {
		if p.JobID == "held" && (p.Reason != "budget_exhausted" || p.Message() != "the budget is spent") {
			t.Fatalf("held job pending %q: %q", p.Reason, p.Message())
		}
	}
}
