package sched

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// One user's jobs without GPUs run at most Snapshot.CPUJobsPerUser at
// once; the rest wait with ReasonUserCPUJobLimit, and nobody else's jobs
// (nor the user's GPU jobs) are held back.
func TestCPUJobsPerUser(t *testing.T) {
	cpu := func(id, user string, at time.Duration) *jb { return mk(id).user(user).gpus(0).at(at) }
	five := []*jb{cpu("a1", "ana", 0), cpu("a2", "ana", time.Second), cpu("a3", "ana", 2*time.Second),
		cpu("a4", "ana", 3*time.Second), cpu("a5", "ana", 4*time.Second)}
	cpuRun := func(id, user string) Running { // a running job with no GPUs
		return Running{ID: id, User: user, Project: "p", Priority: 2, StartedAt: t0, Estimate: time.Hour,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{}}}}
	}
	group := cpu("arr", "ana", 0).build()
	group.Count = 5
	tests := map[string]struct {
		limit   int
		queue   []Job
		running []Running
		quotas  map[string]int
		policy  string
		starts  []string       // in any order
		capped  []string       // waiting with ReasonUserCPUJobLimit
		counts  map[string]int // starts per id (groups)
	}{
		"no cap: all start": {limit: 0, queue: jobs(five...),
			starts: []string{"a1", "a2", "a3", "a4", "a5"}},
		"cap 2: the first two start, the rest wait, another user's runs": {limit: 2,
			queue:  append(jobs(five...), cpu("b1", "bob", 5*time.Second).build()),
			starts: []string{"a1", "a2", "b1"}, capped: []string{"a3", "a4", "a5"}},
		"running zero-GPU jobs count": {limit: 2, queue: jobs(five...),
			running: []Running{cpuRun("r1", "ana"), cpuRun("r2", "bob")},
			starts:  []string{"a1"}, capped: []string{"a2", "a3", "a4", "a5"}},
		"running GPU jobs do not count, GPU jobs are not capped": {limit: 1,
			queue:   jobs(cpu("a1", "ana", 0), mk("g1").user("ana").gpus(2).at(time.Second), cpu("a2", "ana", 2*time.Second)),
			running: []Running{run("rg", "ana", 2, "n1", 0, time.Hour, 0), cpuRun("r2", "bob")},
			starts:  []string{"a1", "g1"}, capped: []string{"a2"}},
		"at the cap already (lowered since): nothing more starts": {limit: 1, queue: jobs(five[:2]...),
			running: []Running{cpuRun("r1", "ana"), cpuRun("r2", "ana")},
			capped:  []string{"a1", "a2"}},
		"a group of five starts as many as the cap allows": {limit: 3, queue: []Job{group},
			counts: map[string]int{"arr": 3}, capped: []string{"arr"}},
		"over a GPU quota (deferred to borrow) still capped": {limit: 2, queue: jobs(five...),
			running: []Running{run("rg", "ana", 2, "n1", 0, time.Hour, 0, 1)}, quotas: map[string]int{"ana": 1},
			starts: []string{"a1", "a2"}, capped: []string{"a3", "a4", "a5"}},
		"fair share: one user capped, another's take the turns": {limit: 1, policy: PolicyFairShare,
			queue:  jobs(cpu("a1", "ana", 0), cpu("a2", "ana", 0), cpu("b1", "bob", 0), cpu("b2", "bob", 0)),
			starts: []string{"a1", "b1"}, capped: []string{"a2", "b2"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := Policy{Name: PolicyFCFS, UserQuotas: tc.quotas}
			if tc.policy != "" {
				p.Name = tc.policy
			}
			r := Schedule(Snapshot{Now: t0.Add(time.Hour), Nodes: []Node{node("n1", 4, "H100", 80)},
				Queue: tc.queue, Running: tc.running, Policy: p, CPUJobsPerUser: tc.limit})
			counts := map[string]int{}
			for _, s := range r.Starts {
				counts[s.JobID]++
			}
			want := tc.counts
			if want == nil {
				want = map[string]int{}
				for _, id := range tc.starts {
					want[id] = 1
				}
			}
			if !maps.Equal(counts, want) {
				t.Fatalf("starts = %v, want %v", counts, want)
			}
			var capped []string
			for _, pd := range r.Pending {
				if pd.Reason == ReasonUserCPUJobLimit {
					capped = append(capped, pd.JobID)
					if m := pd.Message(); !strings.Contains(m, "without GPUs running; the limit is") || !strings.Contains(m, "--max-running-cpu-jobs-per-user") {
						t.Errorf("%s: message %q", pd.JobID, m)
					}
				}
			}
			slices.Sort(capped)
			if !slices.Equal(capped, tc.capped) {
				t.Fatalf("capped = %v, want %v (pending %+v)", capped, tc.capped, r.Pending)
			}
			plan := EstimateStarts(Snapshot{Now: t0.Add(time.Hour), Nodes: []Node{node("n1", 4, "H100", 80)},
				Queue: tc.queue, Running: tc.running, Policy: p, CPUJobsPerUser: tc.limit}, r, DefaultPlanDepth)
			for _, id := range tc.capped {
				if at, ok := plan[id]; ok {
					t.Errorf("%s: estimated start %s; a capped job's start is not known", id, at)
				}
			}
		})
	}
}
