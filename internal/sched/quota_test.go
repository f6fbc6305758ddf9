package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Quotas charge a slice or a share its GPU-equivalents, not a GPU.
func TestQuotaChargesFraction(t *testing.T) {
	sevens := func() []Node { // two H100s, each seven 1g.10gb slices; two whole GPUs
		n := node("n1", 4, "H100", 80)
		one := slices.Repeat([]string{"1g.10gb"}, 7)
		migGPU(&n, 0, one...)
		migGPU(&n, 1, one...)
		return []Node{n}
	}
	mixed := func() []Node {
		n := node("n1", 3, "H100", 80)
		migGPU(&n, 0, "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb")
		n.GPUs[1].Share = &Share{}
		return []Node{n}
	}
	slice := func(id string, mig int, profile string, frac float64) Running {
		return Running{ID: id, User: "u", StartedAt: t0.Add(-time.Hour), Estimate: time.Hour,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{0}, Part: &Part{MIG: mig, Profile: profile, Fraction: frac}}}}
	}
	many := func(prefix string, n int, mk func(string) Job) []Job {
		var js []Job
		for i := range n {
			js = append(js, mk(fmt.Sprintf("%s%d", prefix, i+1)))
		}
		return js
	}
	tests := map[string]struct {
		nodes   func() []Node
		running []Running
		queue   []Job
		users   map[string]int
		proj    map[string]int
		starts  []string
		waits   map[string]string // job -> message of its over_quota
	}{
		"seven 1g.10gb fit a 1-GPU quota, an eighth waits": {
			nodes: sevens, users: map[string]int{"u": 1},
			queue:  many("s", 8, func(id string) Job { return sliceJob(id, "1g.10gb", 0) }),
			starts: []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7"},
			waits:  map[string]string{"s8": "user u over quota: 1 of 1 GPUs in use; a GPU slice or share never borrows"},
		},
		"running slices count their fraction": {
			nodes: mixed, users: map[string]int{"u": 1},
			running: []Running{slice("r1", 0, "1g.10gb", 1.0/7), slice("r2", 1, "1g.10gb", 1.0/7),
				slice("r3", 2, "1g.10gb", 1.0/7), slice("r4", 3, "1g.10gb", 1.0/7), slice("r5", 4, "1g.10gb", 1.0/7)},
			queue: []Job{sliceJob("big", "3g.40gb", 0)},
			waits: map[string]string{"big": "user u over quota: 0.71 of 1 GPUs in use; a GPU slice or share never borrows"},
		},
		"a whole GPU beside slices within the quota": {
			nodes: mixed, users: map[string]int{"u": 2},
			running: []Running{slice("r1", 0, "1g.10gb", 1.0/7), slice("r2", 1, "1g.10gb", 1.0/7), slice("r3", 2, "1g.10gb", 1.0/7)},
			queue:   []Job{job("w", 1, 1, 0), sliceJob("s", "3g.40gb", 0)},
			starts:  []string{"w", "s"},
		},
		"project quota: four 20 GB shares of an 80 GB GPU": {
			nodes: mixed, proj: map[string]int{"p": 1},
			queue:  many("h", 5, func(id string) Job { j := shareJob(id, "u", 20, 0); j.Project = "p"; return j }),
			starts: []string{"h1", "h2", "h3", "h4"},
			waits:  map[string]string{"h5": "project p over quota: 1 of 1 GPUs in use; a GPU slice or share never borrows"},
		},
		"the fraction is the part's, not the GPU's": {
			nodes: mixed, users: map[string]int{"u": 1},
			running: []Running{slice("r1", 0, "1g.10gb", 1.0/7), slice("r2", 1, "1g.10gb", 1.0/7),
				slice("r3", 2, "1g.10gb", 1.0/7), slice("r4", 3, "1g.10gb", 1.0/7)},
			queue:  []Job{sliceJob("big", "3g.40gb", 0), sliceJob("one", "1g.10gb", 0)},
			starts: []string{"big"},
			waits:  map[string]string{"one": "user u over quota: 1 of 1 GPUs in use; a GPU slice or share never borrows"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := tc.nodes()
			for _, r := range tc.running {
				ns[0].GPUs[0].MIG[r.Placements[0].Part.MIG].Free = false
			}
			r := Schedule(Snapshot{Now: t0, Nodes: ns, Running: tc.running, Queue: tc.queue,
				Policy: Policy{Name: PolicyFCFS, Backfill: true, UserQuotas: tc.users, ProjectQuotas: tc.proj}})
			var got []string
			for _, s := range r.Starts {
				got = append(got, s.JobID)
			}
			slices.Sort(got)
			if want := slices.Sorted(slices.Values(tc.starts)); !slices.Equal(got, want) {
				t.Fatalf("starts %v, want %v", got, tc.starts)
			}
			for _, p := range r.Pending {
				want, ok := tc.waits[p.JobID]
				if !ok {
					continue
				}
				if p.Reason != ReasonQuota || p.Message() != want {
					t.Errorf("%s: %s %q, want %s %q", p.JobID, p.Reason, p.Message(), ReasonQuota, want)
				}
				delete(tc.waits, p.JobID)
			}
			if len(tc.waits) > 0 {
				t.Errorf("not pending: %v", tc.waits)
			}
		})
	}
}
