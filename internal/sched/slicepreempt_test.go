package sched

import (
	"slices"
	"testing"
	"time"
)

// TestSlicePreemption: a queued slice job of higher priority preempts the
// lowest running slice job holding a slice that fits it, under the
// policy's preemption switch, freeing only that slice.
func TestSlicePreemption(t *testing.T) {
	running := func(id string, prio, slice int, profile string, ago time.Duration) Running {
		return Running{ID: id, User: "v", Priority: prio, StartedAt: t0.Add(-ago), SubmittedAt: t0.Add(-ago),
			Placements: []Placement{{NodeID: "n1", GPUs: []int{0}, Part: &Part{MIG: slice, Profile: profile, Fraction: 3.0 / 7}}}}
	}
	hi := func(profile string, prio int) Job {
		j := sliceJob("hi", profile, 0)
		j.User, j.Priority = "w", prio
		return j
	}
	tests := map[string]struct {
		layout     []string // GPU 0's slices, all held
		running    []Running
		queue      []Job
		off        bool
		minRun     time.Duration
		victims    []string
		wantReason string // hi's
	}{
		"the lowest slice of the profile": {
			layout:  []string{"3g.40gb", "3g.40gb"},
			running: []Running{running("mid", 2, 0, "3g.40gb", time.Hour), running("lo", 1, 1, "3g.40gb", 2*time.Hour)},
			queue:   []Job{hi("3g.40gb", 3)}, victims: []string{"lo"}, wantReason: ReasonPreempting,
		},
		"preemption off": {
			layout:  []string{"3g.40gb", "3g.40gb"},
			running: []Running{running("lo", 1, 0, "3g.40gb", time.Hour), running("lo2", 1, 1, "3g.40gb", time.Hour)},
			queue:   []Job{hi("3g.40gb", 3)}, off: true, wantReason: ReasonResources,
		},
		"equal priority preempts nothing": {
			layout:  []string{"3g.40gb", "3g.40gb"},
			running: []Running{running("a", 2, 0, "3g.40gb", time.Hour), running("b", 2, 1, "3g.40gb", time.Hour)},
			queue:   []Job{hi("3g.40gb", 2)}, wantReason: ReasonResources,
		},
		"only a slice of the profile": {
			layout:  []string{"3g.40gb", "4g.40gb"},
			running: []Running{running("mid", 2, 0, "3g.40gb", time.Hour), running("lo", 1, 1, "4g.40gb", time.Hour)},
			queue:   []Job{hi("3g.40gb", 3)}, victims: []string{"mid"}, wantReason: ReasonPreempting,
		},
		"any: a slice with the memory": {
			layout:  []string{"1g.10gb", "3g.40gb"},
			running: []Running{running("tiny", 1, 0, "1g.10gb", time.Hour), running("lo", 2, 1, "3g.40gb", time.Hour)},
			queue:   []Job{func() Job { j := hi(MIGAny, 3); j.MinMemoryMiB = 20 << 10; return j }()}, victims: []string{"lo"}, wantReason: ReasonPreempting,
		},
		"a slice being freed is waited for": {
			layout: []string{"3g.40gb", "3g.40gb"},
			running: []Running{func() Running { r := running("going", 2, 0, "3g.40gb", time.Hour); r.Preempting = true; return r }(),
				running("lo", 1, 1, "3g.40gb", time.Hour)},
			queue: []Job{hi("3g.40gb", 3)}, wantReason: ReasonPreempting,
		},
		"min run time protects a slice": {
			layout:  []string{"3g.40gb", "3g.40gb"},
			running: []Running{running("mid", 2, 0, "3g.40gb", time.Hour), running("lo", 1, 1, "3g.40gb", time.Minute)},
			queue:   []Job{hi("3g.40gb", 3)}, minRun: 10 * time.Minute, victims: []string{"mid"}, wantReason: ReasonPreempting,
		},
		"two waiting jobs preempt two slices": {
			layout:  []string{"3g.40gb", "3g.40gb"},
			running: []Running{running("mid", 2, 0, "3g.40gb", time.Hour), running("lo", 1, 1, "3g.40gb", time.Hour)},
			queue:   []Job{hi("3g.40gb", 3), func() Job { j := hi("3g.40gb", 3); j.ID = "hi2"; return j }()}, victims: []string{"lo", "mid"}, wantReason: ReasonPreempting,
		},
		"a whole-GPU job preempts no slice": {
			layout:  []string{"3g.40gb", "3g.40gb"},
			running: []Running{running("lo", 1, 0, "3g.40gb", time.Hour), running("lo2", 1, 1, "3g.40gb", time.Hour)},
			queue:   []Job{{ID: "hi", User: "w", Priority: 4, GPUs: 1, SubmittedAt: t0}}, wantReason: ReasonUnsatisfiable,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("n1", 1, "H100", 80)
			migGPU(&n, 0, tc.layout...)
			for i := range n.GPUs[0].MIG {
				n.GPUs[0].MIG[i].Free = false
			}
			pol := Policy{Name: PolicyPriority, Preemption: !tc.off, Backfill: true, MinRunTime: tc.minRun}
			r := Schedule(Snapshot{Now: t0, Nodes: []Node{n}, Running: tc.running, Queue: tc.queue, Policy: pol})
			var victims []string
			for _, p := range r.Preemptions {
				victims = append(victims, p.JobID)
			}
			slices.Sort(victims)
			if !slices.Equal(victims, tc.victims) {
				t.Errorf("victims %v, want %v (%+v)", victims, tc.victims, r.Preemptions)
			}
			if len(r.Starts) != 0 {
				t.Errorf("starts %v", startIDs(r))
			}
			for _, p := range r.Pending {
				if p.JobID == "hi" && p.Reason != tc.wantReason {
					t.Errorf("hi waits %s (%s), want %s", p.Reason, p.Message(), tc.wantReason)
				}
			}
		})
	}
}
