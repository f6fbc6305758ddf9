package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// randomSnapshot builds a random cluster (mixed sizes, models, NVLink
// pairs, cordoned nodes), running jobs on it, a queue, usage and a policy.
func randomSnapshot(rng *rand.Rand) Snapshot {
	now := t0.Add(10 * time.Hour)
	users := []string{"ana", "bob", "cy", "dee"}
	projects := []string{"vision", "nlp"}
	var nodes []Node
	for n := range 1 + rng.IntN(6) {
		size := []int{1, 2, 4, 8}[rng.IntN(4)]
		nd := node(fmt.Sprintf("n%d", n), size, []string{"H100", "A100"}[rng.IntN(2)], 40+40*int64(rng.IntN(2)))
		nd.Schedulable = rng.IntN(8) != 0
		if rng.IntN(2) == 0 {
			for g := range nd.GPUs {
				nd.GPUs[g].Domain = g / 2
			}
		}
		nodes = append(nodes, nd)
	}
	// Running jobs take some GPUs.
	var running []Running
	for n := range nodes {
		for g := range nodes[n].GPUs {
			if rng.IntN(3) != 0 {
				continue
			}
			nodes[n].GPUs[g].Free = false
			if rng.IntN(6) == 0 {
				continue // held outside Corral
			}
			u := users[rng.IntN(len(users))]
			running = append(running, Running{ID: fmt.Sprintf("r%d-%d", n, g), User: u, Project: projects[rng.IntN(2)],
				Priority: 1 + rng.IntN(4), StartedAt: now.Add(-time.Duration(rng.IntN(600)) * time.Minute),
				Estimate: time.Duration(1+rng.IntN(600)) * time.Minute, Borrowed: rng.IntN(4) == 0, Preempting: rng.IntN(10) == 0,
				Placements: []Placement{{NodeID: nodes[n].ID, GPUs: []int{nodes[n].GPUs[g].Index}}}})
		}
	}
	var queue []Job
	for i := range rng.IntN(40) {
		j := Job{ID: fmt.Sprintf("j%02d", i), User: users[rng.IntN(len(users))], Project: projects[rng.IntN(2)],
			Priority: 1 + rng.IntN(4), GPUs: rng.IntN(9), SubmittedAt: now.Add(-time.Duration(rng.IntN(900)) * time.Minute),
			Estimate: time.Duration(1+rng.IntN(300)) * time.Minute, EstimateGiven: rng.IntN(2) == 0}
		if rng.IntN(6) == 0 {
			j.Nodes = 1 + rng.IntN(3)
			j.GPUs = max(j.GPUs, 1)
		}
		if rng.IntN(8) == 0 {
			j.GPUType = "a100"
		}
		if rng.IntN(8) == 0 {
			j.MinMemoryMiB = 60 * 1024
		}
		queue = append(queue, j)
	}
	p := Policy{Name: Policies()[rng.IntN(4)], Backfill: rng.IntN(2) == 0, Preemption: rng.IntN(2) == 0, Spread: rng.IntN(5) == 0,
		MinRunTime: time.Duration(rng.IntN(3)) * 30 * time.Minute}
	if rng.IntN(2) == 0 {
		p.ProjectQuotas = map[string]int{"vision": rng.IntN(10)}
		p.UserQuotas = map[string]int{"ana": rng.IntN(6)}
	}
	usage := Usage{Users: map[string]float64{"ana": float64(rng.IntN(1e5)), "bob": float64(rng.IntN(1e5))}, Projects: map[string]float64{"nlp": float64(rng.IntN(1e5))}}
	return Snapshot{Now: now, Nodes: nodes, Running: running, Queue: queue, Usage: usage, Policy: p}
}

// TestScheduleProperties checks invariants over thousands of random
// snapshots: no GPU double-booked, no partial gang, a decision for every
// job, quotas exceeded only by borrowing, backfill never delays the head's
// reservation, preemption only of eligible jobs and only when it makes
// room, and the same input always giving the same output.
func TestScheduleProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for iter := range 4000 {
		s := randomSnapshot(rng)
		r := Schedule(s)
		if again := Schedule(s); !reflect.DeepEqual(r, again) {
			t.Fatalf("iter %d: not deterministic", iter)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iter %d (policy %+v): %s", iter, s.Policy, fmt.Sprintf(format, args...))
		}
		free := map[string]bool{}
		model := map[string]GPU{}
		sched := map[string]bool{}
		for _, n := range s.Nodes {
			sched[n.ID] = n.Schedulable
			for _, g := range n.GPUs {
				k := fmt.Sprintf("%s/%d", n.ID, g.Index)
				free[k], model[k] = g.Free, g
			}
		}
		byID := map[string]Job{}
		for _, j := range s.Queue {
			byID[j.ID] = j
		}
		userGPUs, projectGPUs := holdings(s.Running)
		taken := map[string]bool{}
		for _, st := range r.Starts {
			j := byID[st.JobID]
			if len(st.Placements) != nodesWanted(&j) {
				fail("job %s got %d placements for %d nodes", j.ID, len(st.Placements), nodesWanted(&j))
			}
			seen := map[string]bool{}
			for _, p := range st.Placements {
				if seen[p.NodeID] || !sched[p.NodeID] {
					fail("job %s placed twice or on an unschedulable node %s", j.ID, p.NodeID)
				}
				seen[p.NodeID] = true
				if len(p.GPUs) != j.GPUs {
					fail("job %s partial gang on %s: %v", j.ID, p.NodeID, p.GPUs)
				}
				for _, g := range p.GPUs {
					k := fmt.Sprintf("%s/%d", p.NodeID, g)
					m := model[k]
					if !free[k] || taken[k] || !matches(&m, &j) {
						fail("GPU %s double-booked, busy or unfit (job %s)", k, j.ID)
					}
					taken[k] = true
				}
			}
			n := j.GPUs * nodesWanted(&j)
			if !st.Borrowed {
				if q, ok := s.Policy.UserQuotas[j.User]; ok && userGPUs[j.User]+n > q {
					fail("job %s takes user %s past quota %d without borrowing", j.ID, j.User, q)
				}
				if q, ok := s.Policy.ProjectQuotas[j.Project]; ok && projectGPUs[j.Project]+n > q {
					fail("job %s takes project %s past quota %d without borrowing", j.ID, j.Project, q)
				}
			}
			userGPUs[j.User] += n
			projectGPUs[j.Project] += n
		}
		if len(r.Starts)+len(r.Pending) != len(s.Queue) {
			fail("decisions for %d of %d jobs", len(r.Starts)+len(r.Pending), len(s.Queue))
		}
		// Preemption: only eligible victims, and only when it makes room.
		runByID := map[string]Running{}
		for _, run := range s.Running {
			runByID[run.ID] = run
		}
		victimsFor := map[string][]Running{}
		for _, pr := range r.Preemptions {
			v := runByID[pr.JobID]
			j := byID[pr.ForJob]
			if v.Preempting || s.Now.Sub(v.StartedAt) < s.Policy.MinRunTime {
				fail("ineligible victim %+v for %s", v, j.ID)
			}
			// A user's own job yields only to their higher-priority job in
			// its project, and only for priority.
			if v.User == j.User && (v.Priority >= j.Priority || v.Project != j.Project || pr.Reason != ReasonPreempted) {
				fail("own job %+v preempted for %s (priority %d, project %s, reason %s)", v, j.ID, j.Priority, j.Project, pr.Reason)
			}
			if !s.Policy.Preemption && !v.Borrowed {
				fail("victim %s not borrowed with preemption off", v.ID)
			}
			victimsFor[j.ID] = append(victimsFor[j.ID], v)
		}
		for jid, victims := range victimsFor {
			j := byID[jid]
			nodes := cloneNodes(s.Nodes)
			for _, v := range append(victims, preempting(s.Running)...) {
				freeUp(nodes, v.Placements)
			}
			ix := newIndex(nodes)
			ix.take(startsPlacements(r.Starts))
			if _, ok := ix.find(&j, false); !ok {
				fail("preempted %d jobs for %s, which still would not fit", len(victims), jid)
			}
		}
		// Backfill: the head can still start by its reservation.
		if r.Head != "" && !r.ReservedAt.Equal(never) && s.Policy.Backfill {
			head := byID[r.Head]
			after := s
			after.Nodes = cloneNodes(s.Nodes)
			after.Running = append([]Running{}, s.Running...)
			for _, st := range r.Starts {
				j := byID[st.JobID]
				after.Running = append(after.Running, Running{ID: j.ID, StartedAt: s.Now, Estimate: j.Estimate, Placements: st.Placements})
				takeUp(after.Nodes, st.Placements)
			}
			ix := newIndex(after.Nodes)
			at, _, ok := newTimeline(ix, after.Running, nil, s.Now).earliest(ix, &head)
			if !ok || at.After(r.ReservedAt) {
				fail("backfill delayed head %s from %v to %v (%v)", head.ID, r.ReservedAt, at, ok)
			}
		}
	}
}

// TestAgingBoundsWaits: under priority, a job is never ordered behind a job
// submitted more than (priority gap) x AgingInterval after it.
func TestAgingBoundsWaits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	p := Policy{Name: PolicyPriority}.WithDefaults()
	for iter := range 500 {
		var q []Job
		for i := range 50 {
			q = append(q, Job{ID: fmt.Sprintf("j%02d", i), Priority: 1 + rng.IntN(4), SubmittedAt: t0.Add(time.Duration(rng.IntN(24*60)) * time.Minute)})
		}
		order := Order(q, p)
		for a := range order {
			for b := a + 1; b < len(order); b++ {
				early, late := order[b], order[a] // late was ordered first
				gap := time.Duration(late.Priority-early.Priority) * p.AgingInterval
				if late.SubmittedAt.Sub(early.SubmittedAt) > gap {
					t.Fatalf("iter %d: %s (prio %d, %v) overtook %s (prio %d, %v)", iter, late.ID, late.Priority, late.SubmittedAt, early.ID, early.Priority, early.SubmittedAt)
				}
			}
		}
	}
}

func cloneNodes(ns []Node) []Node {
	out := make([]Node, len(ns))
	for i, n := range ns {
		out[i] = n
		out[i].GPUs = append([]GPU{}, n.GPUs...)
	}
	return out
}

func setFree(ns []Node, ps []Placement, free bool) {
	for _, p := range ps {
		for i := range ns {
			if ns[i].ID != p.NodeID {
				continue
			}
			for g := range ns[i].GPUs {
				for _, idx := range p.GPUs {
					if ns[i].GPUs[g].Index == idx {
						ns[i].GPUs[g].Free = free
					}
				}
			}
		}
	}
}

func freeUp(ns []Node, ps []Placement) { setFree(ns, ps, true) }
func takeUp(ns []Node, ps []Placement) { setFree(ns, ps, false) }

func preempting(rs []Running) []Running {
	var out []Running
	for _, r := range rs {
		if r.Preempting {
			out = append(out, r)
		}
	}
	return out
}

func startsPlacements(ss []Start) []Placement {
	var out []Placement
	for _, s := range ss {
		out = append(out, s.Placements...)
	}
	return out
}
