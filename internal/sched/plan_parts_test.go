package sched

import (
	"testing"
	"time"
)

// TestEstimateStartsOfParts: waiting slice and share jobs get an
// estimated start from the parts' plan: when the running job holding a
// fitting slice ends (or a share's memory, compute and user allow), one
// after another in queue order; never "now", and none where only a hold
// (no end) has the part.
func TestEstimateStartsOfParts(t *testing.T) {
	now := t0.Add(time.Hour)
	slice := func(id, profile string, est time.Duration) Job {
		j := sliceJob(id, profile, 0)
		j.Estimate = est
		return j
	}
	share := func(id, user string, gb int64, compute int, est time.Duration) Job {
		j := shareJob(id, user, gb, compute)
		j.Estimate = est
		return j
	}
	heldSlice := func(id string, gpu, mig int, startedAgo, est time.Duration) Running {
		return Running{ID: id, User: "x", StartedAt: now.Add(-startedAgo), Estimate: est,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{gpu}, Part: &Part{MIG: mig, Profile: "3g.40gb"}}}}
	}
	heldShare := func(id, user string, gb int64, compute int, est time.Duration) Running {
		return Running{ID: id, User: user, StartedAt: now, Estimate: est,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{1}, Part: &Part{MIG: -1, ShareMiB: gb << 10, ShareCompute: compute}}}}
	}
	tests := map[string]struct {
		nodes   func(n *Node) // n1: GPU 0 in MIG mode (3g.40gb, 4g.40gb), GPU 1 shared, 80 GB
		running []Running
		queue   []Job
		want    map[string]time.Duration // after now; absent: no estimate
	}{
		"a slice when its holder ends, the next after it": {
			running: []Running{heldSlice("r", 0, 0, 10*time.Minute, time.Hour)},
			queue:   []Job{slice("a", "3g.40gb", 30*time.Minute), slice("b", "3g.40gb", time.Hour)},
			want:    map[string]time.Duration{"a": 50 * time.Minute, "b": 80 * time.Minute},
		},
		"a slice held by a job past its estimate: doubled": {
			running: []Running{heldSlice("r", 0, 0, 90*time.Minute, time.Hour)},
			queue:   []Job{slice("a", "3g.40gb", time.Hour)},
			want:    map[string]time.Duration{"a": 30 * time.Minute}, // 2 h from 90 min ago
		},
		"a slice held by a hold: never in the plan": {
			nodes: func(n *Node) { n.GPUs[0].MIG[0].Free, n.GPUs[0].MIG[0].Holder = false, "hold nb" },
			queue: []Job{slice("a", "3g.40gb", time.Hour)},
			want:  map[string]time.Duration{},
		},
		"a share when the other user's ends": {
			running: []Running{heldShare("r", "ann", 20, 25, 40*time.Minute)},
			queue:   []Job{share("a", "ben", 10, 0, time.Hour), share("b", "ann", 10, 0, time.Hour)},
			// b (ann) fits beside ann's share now: it starts this cycle;
			// a (ben) waits for both of ann's to end.
			want: map[string]time.Duration{"a": time.Hour},
		},
		"a share waits for memory": {
			running: []Running{heldShare("r", "ann", 70, 0, 20*time.Minute)},
			queue:   []Job{share("a", "ann", 30, 0, time.Hour), share("b", "ann", 60, 0, time.Hour)},
			// a at +20m (80 GB fits 70+30? no: 100 > 80); b after a: 30+60 > 80.
			want: map[string]time.Duration{"a": 20 * time.Minute, "b": 80 * time.Minute},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("n1", 2, "H100", 80)
			migGPU(&n, 0, "3g.40gb", "4g.40gb")
			n.GPUs[1].Share = &Share{}
			for _, r := range tc.running {
				for _, p := range r.Placements {
					switch {
					case p.Part.MIG >= 0:
						n.GPUs[0].MIG[p.Part.MIG].Free, n.GPUs[0].MIG[p.Part.MIG].Holder = false, r.ID
					default:
						sh := n.GPUs[1].Share
						sh.UsedMiB, sh.UsedCompute, sh.User = sh.UsedMiB+p.Part.ShareMiB, sh.UsedCompute+p.Part.ShareCompute, r.User
						sh.Holders = append(sh.Holders, r.ID)
						n.GPUs[1].Free = false
					}
				}
			}
			if tc.nodes != nil {
				tc.nodes(&n)
			}
			s := Snapshot{Now: now, Nodes: []Node{n}, Running: tc.running, Queue: tc.queue, Policy: Policy{Name: PolicyFCFS, Backfill: true}}
			r := Schedule(s)
			plan := EstimateStarts(s, r, DefaultPlanDepth)
			for id, at := range plan {
				want, ok := tc.want[id]
				if !ok || !at.Equal(now.Add(want)) {
					t.Errorf("%s estimated at +%v; want %v (listed: %v)", id, at.Sub(now), want, ok)
				}
			}
			for id := range tc.want {
				if _, ok := plan[id]; !ok {
					t.Errorf("%s has no estimate; want +%v (starts %+v, pending %+v)", id, tc.want[id], r.Starts, r.Pending)
				}
			}
		})
	}
}
