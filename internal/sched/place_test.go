package sched

import (
	"testing"
	"time"
)

// Scoring by end: a single-node job goes to a partly used node whose jobs
// end no sooner than it does, else to the one it keeps busy the least
// longer, and breaks an empty node only when no partly used node fits.
func TestPlaceByEnd(t *testing.T) {
	h := time.Hour
	now := t0.Add(10 * h)
	nodes := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5), node("n2", 8, "H100", 80, 0, 1, 2, 3, 4, 5),
		node("n3", 8, "H100", 80), node("n4", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6)}
	running := []Running{
		run("r1", "x", 2, "n1", 9*h, 2*h, 0, 1, 2, 3, 4, 5),    // ends in 1h
		run("r2", "x", 2, "n2", 9*h, 11*h, 0, 1, 2, 3, 4, 5),   // ends in 10h
		run("r4", "x", 2, "n4", 9*h, 3*h, 0, 1, 2, 3, 4, 5, 6), // ends in 2h
	}
	tests := map[string]struct {
		job       *jb
		plainBest bool
		want      string
	}{
		"ends before n2's jobs: n2":             {job: mk("a").est(5 * h), want: "n2"},
		"ends after every node's: least longer": {job: mk("a").est(20 * h), want: "n2"},
		"ends before n4's: the fullest":         {job: mk("a").est(h), want: "n4"},
		"plain best fit: the fullest":           {job: mk("a").est(5 * h), plainBest: true, want: "n4"},
		"two GPUs: n2, not the empty n3":        {job: mk("a").gpus(2).est(20 * h), want: "n2"},
		"eight GPUs: only the empty node":       {job: mk("a").gpus(8).est(h), want: "n3"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: now, Nodes: nodes, Running: running, Queue: jobs(tc.job),
				Policy: Policy{Name: PolicyFCFS, Backfill: true, PlainBestFit: tc.plainBest}})
			if len(r.Starts) != 1 || r.Starts[0].Placements[0].NodeID != tc.want {
				t.Fatalf("starts %+v, want on %s", r.Starts, tc.want)
			}
		})
	}
}
