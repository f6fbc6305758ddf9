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
