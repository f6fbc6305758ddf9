package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPreemptedJobsDoNotComeStraightBack: when a job preempts others, the
// GPUs freed are its own at the next cycle, under every policy, with mixed
// priorities, users and projects, and the usage the victims' grace added:
// no victim (nor its user's other jobs) takes them back first, so that the
// taker would only preempt it again after min_run_time, for ever.
func TestPreemptedJobsDoNotComeStraightBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	users := []string{"ana", "bob", "cy", "dee"}
	projects := []string{"vision", "nlp"}
	grace := 30 * time.Second
	preempted := 0
	for iter := range 3000 {
		now := t0.Add(24 * time.Hour)
		var nodes []Node
		var running []Running
		for n := range 1 + rng.IntN(2) {
			nd := node(fmt.Sprintf("n%d", n), []int{4, 8}[rng.IntN(2)], "H100", 80)
			for g := 0; g < len(nd.GPUs); {
				k := min(1+rng.IntN(4), len(nd.GPUs)-g)
				var idx []int
				for i := range k {
					nd.GPUs[g+i].Free = false
					idx = append(idx, g+i)
				}
				g += k
				started := now.Add(-time.Duration(15+rng.IntN(600)) * time.Minute)
				running = append(running, Running{ID: fmt.Sprintf("r%d-%d", n, g), User: users[rng.IntN(len(users))],
					Project: projects[rng.IntN(2)], Priority: 1 + rng.IntN(4), StartedAt: started,
					SubmittedAt: started.Add(-time.Duration(rng.IntN(600)) * time.Minute), Estimate: 10 * time.Hour,
					Placements: []Placement{{NodeID: nd.ID, GPUs: idx}}})
			}
			nodes = append(nodes, nd)
		}
		j := Job{ID: "j", User: users[rng.IntN(len(users))], Project: projects[rng.IntN(2)], Priority: 1 + rng.IntN(4),
			GPUs: 1 + rng.IntN(4), SubmittedAt: now.Add(-time.Duration(rng.IntN(900)) * time.Minute), Estimate: time.Hour}
		usage := Usage{Users: map[string]float64{}, Projects: map[string]float64{}}
		for _, u := range users {
			usage.Users[u] = float64(rng.IntN(200_000))
		}
		for _, p := range projects {
			usage.Projects[p] = float64(rng.IntN(400_000))
		}
		pol := Policy{Name: Policies()[rng.IntN(4)], Backfill: rng.IntN(2) == 0, Preemption: true, MinRunTime: 10 * time.Minute}
		first := Schedule(Snapshot{Now: now, Nodes: nodes, Running: running, Queue: []Job{j}, Usage: usage, Policy: pol})
		if len(first.Preemptions) == 0 {
			continue
		}
		preempted++
		// The victims stop after their grace and are requeued; every
		// running job, victims included, used its GPUs meanwhile.
		then := now.Add(grace)
		next := Snapshot{Now: then, Nodes: cloneNodes(nodes), Queue: []Job{j}, Policy: pol,
			Usage: Usage{Users: map[string]float64{}, Projects: map[string]float64{}}}
		for k, v := range usage.Users {
			next.Usage.Users[k] = v
		}
		for k, v := range usage.Projects {
			next.Usage.Projects[k] = v
		}
		var victims []string
		for _, r := range running {
			gs := float64(gpuCount(&r)) * grace.Seconds()
			next.Usage.Users[r.User] += gs
			next.Usage.Projects[r.Project] += gs
			if !slices.ContainsFunc(first.Preemptions, func(p Preemption) bool { return p.JobID == r.ID }) {
				next.Running = append(next.Running, r)
				continue
			}
			victims = append(victims, fmt.Sprintf("%s (%s/%s, priority %d)", r.ID, r.Project, r.User, r.Priority))
			freeUp(next.Nodes, r.Placements)
			next.Queue = append(next.Queue, Job{ID: r.ID, User: r.User, Project: r.Project, Priority: r.Priority,
				SubmittedAt: r.SubmittedAt, GPUs: gpuCount(&r), Estimate: r.Estimate})
		}
		second := Schedule(next)
		if !slices.ContainsFunc(second.Starts, func(s Start) bool { return s.JobID == "j" }) {
			t.Fatalf("iter %d, %s: job j (%s/%s, priority %d, %d GPUs) preempted %v, and at the next cycle started %v instead",
				iter, pol.Name, j.Project, j.User, j.Priority, j.GPUs, victims, startIDs(second))
		}
	}
	if preempted < 300 {
		t.Fatalf("only %d of the random cases preempted: the test checks too little", preempted)
	}
}
