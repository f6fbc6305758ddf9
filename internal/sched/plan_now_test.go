package sched

import (
	"testing"
	"time"
)

// An estimated start is never "now" for a job that did not start now:
// a running job past its estimate is not taken to end this instant (its
// estimate is doubled until it has not outlived it), a held job (a
// budget's) gets no estimate, and a job that waits behind the head with
// backfill off is laid out after it, not now.
func TestEstimateNeverNowForAWaitingJob(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	now := t0.Add(3 * time.Hour)
	// 8 GPUs: 8 held by a job started at t0, estimated 2 h (past it:
	// its new estimate is 4 h, so it ends at t0+4h).
	running := []Running{{ID: "r", User: "a", Project: "p", StartedAt: t0, SubmittedAt: t0, Estimate: 2 * time.Hour,
		Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}
	full := node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6, 7)
	for name, c := range map[string]struct {
		nodes   []Node
		running []Running
		queue   []Job
		policy  Policy
		want    map[string]time.Time // jobs absent here get no estimate
	}{
		"past its estimate": {nodes: []Node{full}, running: running,
			queue: []Job{{ID: "w", User: "b", Project: "p", GPUs: 8, Estimate: time.Hour, SubmittedAt: t0}},
			want:  map[string]time.Time{"w": t0.Add(4 * time.Hour)}},
		"held by a budget": {nodes: []Node{full}, running: running,
			queue: []Job{{ID: "h", User: "b", Project: "p", GPUs: 1, Estimate: time.Hour, SubmittedAt: t0, Held: "budget_exhausted"}},
			want:  map[string]time.Time{}},
		"behind the head on free GPUs": {nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3)},
			running: []Running{{ID: "r", User: "a", Project: "p", StartedAt: t0, SubmittedAt: t0, Estimate: 2 * time.Hour,
				Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3}}}}},
			queue: []Job{{ID: "head", User: "b", Project: "p", GPUs: 8, Estimate: time.Hour, SubmittedAt: t0},
				{ID: "small", User: "c", Project: "p", GPUs: 1, Estimate: time.Hour, SubmittedAt: t0.Add(time.Minute)}},
			policy: Policy{Name: PolicyFCFS, Backfill: false},
			want:   map[string]time.Time{"head": t0.Add(4 * time.Hour), "small": t0.Add(5 * time.Hour)}},
	} {
		t.Run(name, func(t *testing.T) {
			p := c.policy
			if p.Name == "" {
				p.Name = PolicyFCFS
			}
			if name != "behind the head on free GPUs" {
				p.Backfill = true
			}
			s := Snapshot{Now: now, Nodes: c.nodes, Running: c.running, Queue: c.queue, Policy: p}
			r := Schedule(s)
			if len(r.Starts) != 0 {
				t.Fatalf("started %+v; want none", r.Starts)
			}
			plan := EstimateStarts(s, r, DefaultPlanDepth)
			for id, at := range plan {
				if !at.After(now) {
					t.Errorf("%s estimated to start at %v, not after now (%v)", id, at, now)
				}
				if want, ok := c.want[id]; !ok || !at.Equal(want) {
					t.Errorf("%s estimated at %v; want %v (present: %v)", id, at, want, ok)
				}
			}
			for id := range c.want {
				if _, ok := plan[id]; !ok {
					t.Errorf("%s has no estimate; want %v", id, c.want[id])
				}
			}
		})
	}
}
