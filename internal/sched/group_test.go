package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestGroupIsItsJobs: a cycle over a queue whose groups (Count n) are
// written out as n separate identical jobs decides the same starts, on the
// same GPUs, in the same order, and gives the other jobs the same reasons.
// Preemption is off: with it on, a group spends one of the cycle's few
// preemption tries where n separate jobs could spend several (group.go).
func TestGroupIsItsJobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	multi := 0 // cycles where a group started more than one job
	for iter := range 3000 {
		s := randomSnapshot(rng)
		s.Policy.Preemption = false
		for i := range s.Running {
			s.Running[i].Borrowed, s.Running[i].Preempting = false, false
		}
		grouped, expanded := s, s
		grouped.Queue = append([]Job(nil), s.Queue...)
		expanded.Queue = append([]Job(nil), s.Queue...)
		for g := range 1 + rng.IntN(3) {
			base := Job{User: []string{"ana", "bob", "cy"}[rng.IntN(3)], Project: []string{"vision", "nlp"}[rng.IntN(2)],
				Priority: 1 + rng.IntN(4), GPUs: rng.IntN(5), SubmittedAt: s.Now.Add(-time.Duration(rng.IntN(900)) * time.Minute),
				Estimate: time.Duration(1+rng.IntN(300)) * time.Minute, EstimateGiven: rng.IntN(2) == 0}
			if len(s.Queue) > 0 && rng.IntN(3) == 0 { // the shape of a job in the queue
				o := s.Queue[rng.IntN(len(s.Queue))]
				base.GPUs, base.Nodes, base.GPUType, base.MinMemoryMiB = o.GPUs, o.Nodes, o.GPUType, o.MinMemoryMiB
			}
			n := 2 + rng.IntN(12)
			for k := range n {
				e := base
				e.ID = fmt.Sprintf("g%d-%02d", g, k)
				expanded.Queue = append(expanded.Queue, e)
			}
			base.ID, base.Count = fmt.Sprintf("g%d-00", g), n
			grouped.Queue = append(grouped.Queue, base)
		}
		rg, re := Schedule(grouped), Schedule(expanded)
		// The k-th start of a group is its k-th job.
		seen := map[string]int{}
		for i, st := range rg.Starts {
			if strings.HasPrefix(st.JobID, "g") {
				prefix := st.JobID[:strings.IndexByte(st.JobID, '-')]
				rg.Starts[i].JobID = fmt.Sprintf("%s-%02d", prefix, seen[prefix])
				seen[prefix]++
			}
		}
		if !reflect.DeepEqual(rg.Starts, re.Starts) {
			t.Fatalf("iter %d (policy %+v): grouped starts\n%v\nseparate jobs' starts\n%v", iter, s.Policy, rg.Starts, re.Starts)
		}
		reasons := func(r Result) map[string]string {
			m := map[string]string{}
			for _, p := range r.Pending {
				if !strings.HasPrefix(p.JobID, "g") {
					m[p.JobID] = p.Reason
				}
			}
			return m
		}
		if a, b := reasons(rg), reasons(re); !reflect.DeepEqual(a, b) {
			t.Fatalf("iter %d: the other jobs' reasons differ:\n%v\n%v", iter, a, b)
		}
		// One Pending for a group that did not all start.
		for g := range seen {
			if seen[g] > 1 {
				multi++
			}
			n := 0
			for _, p := range rg.Pending {
				if strings.HasPrefix(p.JobID, g+"-") {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("iter %d: group %s has %d Pending entries", iter, g, n)
			}
		}
	}
	if multi < 100 {
		t.Fatalf("only %d cycles started several jobs of a group: the test tests little", multi)
	}
}

// arraysSnapshot is benchSnapshot's cluster (1,000 nodes x 8 GPUs) with
// 100 arrays of 1,000 waiting one-GPU tasks each: as 100 groups, or
// written out as 100,000 jobs. full: every GPU is taken, so nothing
// starts and every task waits; else half the nodes are free.
func arraysSnapshot(grouped, full bool) Snapshot {
	s := benchSnapshot(0, Policy{Name: PolicyFairShare, Backfill: true, Preemption: true, MinRunTime: 10 * time.Minute})
	if full {
		for n := range s.Nodes {
			if n%2 == 1 {
				for g := range s.Nodes[n].GPUs {
					s.Nodes[n].GPUs[g].Free = false
					s.Running = append(s.Running, Running{ID: fmt.Sprintf("f%d-%d", n, g), User: "user9", Project: "p", Priority: 2,
						StartedAt: s.Now.Add(-time.Minute), Estimate: time.Hour, Placements: []Placement{{NodeID: s.Nodes[n].ID, GPUs: []int{g}}}})
				}
			}
		}
	}
	for a := range 100 {
		j := Job{User: fmt.Sprintf("user%d", a%8), Project: "p", Priority: 2, GPUs: 1,
			SubmittedAt: s.Now.Add(-time.Duration(a) * time.Minute), Estimate: time.Hour}
		if grouped {
			j.ID, j.Count = fmt.Sprintf("a%03d_0000", a), 1000
			s.Queue = append(s.Queue, j)
			continue
		}
		for i := range 1000 {
			j.ID = fmt.Sprintf("a%03d_%04d", a, i)
			s.Queue = append(s.Queue, j)
		}
	}
	return s
}

// BenchmarkCycleArrays is one cycle with 100 arrays of 1,000 waiting
// tasks on 1,000 x 8 GPUs (fair_share, backfill and preemption on): full,
// every GPU taken (all 100,000 tasks wait), or half (4,000 GPUs free:
// 4,000 tasks start). groups: each array is one Job with Count 1,000, as
// the orchestrator hands them; jobs: the same tasks as 100,000 Jobs, the
// baseline.
func BenchmarkCycleArrays(b *testing.B) {
	for _, full := range []bool{true, false} {
		for _, grouped := range []bool{true, false} {
			name := map[bool]string{true: "full", false: "half"}[full] + "/" + map[bool]string{true: "groups", false: "jobs"}[grouped]
			b.Run(name, func(b *testing.B) {
				s := arraysSnapshot(grouped, full)
				b.ReportAllocs()
				starts := 0
				for b.Loop() {
					starts = len(Schedule(s).Starts)
				}
				b.ReportMetric(float64(starts), "starts")
			})
		}
	}
}
