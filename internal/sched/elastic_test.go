package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// elastic makes the builder's job elastic: from min to its GPUs, its wait
// for the maximum ending at t0+until.
func (b *jb) elastic(min int, until time.Duration) *jb {
	b.GPUsMin, b.ElasticUntil = min, t0.Add(until)
	return b
}

// granted is the GPUs each start got, by job id.
func granted(r Result) map[string]int {
	out := map[string]int{}
	for _, st := range r.Starts {
		for _, p := range st.Placements {
			out[st.JobID] += len(p.GPUs)
		}
	}
	return out
}

func TestElasticStarts(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := map[string]struct {
		nodes   []Node
		running []Running
		queue   []Job
		policy  Policy
		want    map[string]int // GPUs granted per started job
		pending map[string]string
		borrow  bool // every start is borrowed
	}{
		"an empty node: the maximum": {
			nodes: []Node{node("n1", 8, "H100", 80)},
			queue: jobs(mk("e").gpus(8).elastic(4, 0)),
			want:  map[string]int{"e": 8},
		},
		"half full: what is free": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0, 1, 2)},
			running: []Running{run("r", "x", 2, "n1", 0, 9*time.Hour, 0, 1, 2)},
			queue:   jobs(mk("e").gpus(8).elastic(4, 0)),
			want:    map[string]int{"e": 5},
		},
		"the largest block of several nodes": {
			nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5), node("n2", 8, "H100", 80, 0, 1, 2), node("n3", 8, "H100", 80, 0, 1, 2, 3)},
			queue: jobs(mk("e").gpus(8).elastic(4, 0)),
			want:  map[string]int{"e": 5},
		},
		"within its elastic wait it waits for the maximum": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0, 1, 2)},
			queue:   jobs(mk("e").gpus(8).elastic(4, 2*time.Hour)),
			want:    map[string]int{},
			pending: map[string]string{"e": ReasonResources},
		},
		"never fewer than its minimum": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5)},
			queue:   jobs(mk("e").gpus(8).elastic(4, 0)),
			want:    map[string]int{},
			pending: map[string]string{"e": ReasonResources},
		},
		"a plain job is not shrunk": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0, 1, 2)},
			queue:   jobs(mk("p").gpus(8)),
			want:    map[string]int{},
			pending: map[string]string{"p": ReasonResources},
		},
		"a gang is not elastic": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0), node("n2", 8, "H100", 80, 0)},
			queue:   []Job{func() Job { j := mk("g").gpus(8).elastic(4, 0).build(); j.Nodes = 2; return j }()},
			want:    map[string]int{},
			pending: map[string]string{"g": ReasonResources},
		},
		// n1 frees at 1h, n2 at 3h: the head's reservation is n1; the
		// elastic job shrinks onto n2 rather than touch n1's held GPUs.
		"it shrinks around the head's reservation": {
			nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5), node("n2", 8, "H100", 80, 0, 1)},
			running: []Running{run("r1", "x", 2, "n1", 0, 2*time.Hour, 0, 1, 2, 3, 4, 5),
				run("r2", "x", 2, "n2", 0, 4*time.Hour, 0, 1)},
			queue:   jobs(mk("head").gpus(8), mk("e").gpus(8).elastic(2, 0).at(time.Minute)),
			policy:  Policy{Name: PolicyFCFS, Backfill: true},
			want:    map[string]int{"e": 6},
			pending: map[string]string{"head": ReasonResources},
		},
		"held GPUs only for a job sure to end first": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3)},
			running: []Running{run("r1", "x", 2, "n1", 0, 2*time.Hour, 0, 1, 2, 3)},
			queue: jobs(mk("head").gpus(8), mk("long").gpus(4).elastic(2, 0).at(time.Minute),
				mk("short").gpus(4).elastic(2, 0).at(2*time.Minute).est(30*time.Minute)),
			policy:  Policy{Name: PolicyFCFS, Backfill: true},
			want:    map[string]int{"short": 4},
			pending: map[string]string{"head": ReasonResources, "long": ReasonBackfillReserved},
		},
		"backfill off: nothing passes the head": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3)},
			running: []Running{run("r1", "x", 2, "n1", 0, 2*time.Hour, 0, 1, 2, 3)},
			queue:   jobs(mk("head").gpus(8), mk("e").gpus(4).elastic(2, 0).at(time.Minute)),
			policy:  Policy{Name: PolicyFCFS},
			want:    map[string]int{},
			pending: map[string]string{"head": ReasonResources, "e": ReasonBehindHead},
		},
		"a quota caps the count": {
			nodes:   []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0, 1)},
			running: []Running{run("r", "u", 2, "n2", 0, 9*time.Hour, 0, 1)},
			queue:   jobs(mk("e").gpus(8).elastic(4, 0)),
			policy:  Policy{Name: PolicyFCFS, UserQuotas: map[string]int{"u": 7}},
			want:    map[string]int{"e": 5},
		},
		"over quota even at its minimum: it borrows": {
			nodes:   []Node{node("n1", 8, "H100", 80), node("n2", 8, "H100", 80, 0, 1)},
			running: []Running{run("r", "u", 2, "n2", 0, 9*time.Hour, 0, 1)},
			queue:   jobs(mk("e").gpus(8).elastic(4, 0)),
			policy:  Policy{Name: PolicyFCFS, UserQuotas: map[string]int{"u": 4}},
			want:    map[string]int{"e": 8},
			borrow:  true,
		},
		"the granted count, not the maximum, is charged to the next job's quota": {
			nodes:   []Node{node("n1", 8, "H100", 80, 0, 1, 2), node("n2", 2, "H100", 80)},
			running: []Running{run("r", "x", 2, "n1", 0, 9*time.Hour, 0, 1, 2)},
			queue:   jobs(mk("e").gpus(8).elastic(4, 0), mk("next").gpus(2).at(time.Minute)),
			policy:  Policy{Name: PolicyFCFS, UserQuotas: map[string]int{"u": 7}},
			want:    map[string]int{"e": 5, "next": 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := tc.policy
			if p.Name == "" {
				p.Name = PolicyFCFS
			}
			r := Schedule(Snapshot{Now: now, Nodes: tc.nodes, Running: tc.running, Queue: tc.queue, Policy: p})
			if got := granted(r); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("granted = %v, want %v (pending %+v)", got, tc.want, r.Pending)
			}
			for _, st := range r.Starts {
				if st.Borrowed != tc.borrow {
					t.Errorf("start %s borrowed = %v, want %v", st.JobID, st.Borrowed, tc.borrow)
				}
			}
			for _, pd := range r.Pending {
				if want, ok := tc.pending[pd.JobID]; ok && pd.Reason != want {
					t.Errorf("%s pending %s (%s), want %s", pd.JobID, pd.Reason, pd.Message(), want)
				}
			}
		})
	}
}

// TestElasticPreemptsForItsMinimum: past its wait, an elastic job that
// fits nowhere preempts only as much as its minimum needs.
func TestElasticPreemptsForItsMinimum(t *testing.T) {
	now := t0.Add(time.Hour)
	nodes := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5)}
	running := []Running{run("big", "x", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3), run("small", "y", 1, "n1", 0, 9*time.Hour, 4, 5)}
	pol := Policy{Name: PolicyPriority, Preemption: true, MinRunTime: 10 * time.Minute}
	tests := map[string]struct {
		until   time.Duration
		victims int
	}{
		"past its wait: room for 4 takes one victim":  {until: 0, victims: 1},
		"within its wait: room for 8 takes them both": {until: 2 * time.Hour, victims: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := jobs(mk("e").user("z").prio(4).gpus(8).elastic(4, tc.until))
			r := Schedule(Snapshot{Now: now, Nodes: nodes, Running: running, Queue: q, Policy: pol})
			if len(r.Preemptions) != tc.victims {
				t.Fatalf("preemptions = %+v, want %d", r.Preemptions, tc.victims)
			}
		})
	}
}

// TestElasticEstimate: a waiting elastic job's estimated start is when its
// minimum frees once its wait is over, when its maximum frees before.
func TestElasticEstimate(t *testing.T) {
	now := t0.Add(time.Hour)
	nodes := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5)}
	running := []Running{run("a", "x", 2, "n1", 0, 2*time.Hour, 0, 1, 2), run("b", "x", 2, "n1", 0, 3*time.Hour, 3, 4, 5)}
	tests := map[string]struct {
		until time.Duration
		want  time.Time
	}{
		"past its wait: when 4 are free":   {until: 0, want: t0.Add(2 * time.Hour)},
		"within its wait: when 8 are free": {until: 5 * time.Hour, want: t0.Add(3 * time.Hour)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Snapshot{Now: now, Nodes: nodes, Running: running, Queue: jobs(mk("e").gpus(8).elastic(4, tc.until)),
				Policy: Policy{Name: PolicyFCFS, Backfill: true}}
			r := Schedule(s)
			if len(r.Starts) != 0 {
				t.Fatalf("started %v", r.Starts)
			}
			if got := EstimateStarts(s, r, DefaultPlanDepth)["e"]; !got.Equal(tc.want) {
				t.Fatalf("estimate = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestElasticProperties runs random snapshots with some jobs made elastic
// and checks: each start gets from its minimum to its maximum GPUs on one
// node, all free and unshared; a start is never below the maximum while
// the maximum is within its wait; quotas are passed only by borrowing;
// and backfill never delays the head's reservation.
func TestElasticProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for iter := range 3000 {
		s := randomSnapshot(rng)
		for i := range s.Queue {
			j := &s.Queue[i]
			if j.Nodes <= 1 && j.GPUs > 1 && rng.IntN(2) == 0 {
				j.GPUsMin = 1 + rng.IntN(j.GPUs-1)
				j.ElasticUntil = s.Now.Add(time.Duration(rng.IntN(3)-1) * time.Hour)
			}
		}
		r := Schedule(s)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iter %d (policy %+v): %s", iter, s.Policy, fmt.Sprintf(format, args...))
		}
		byID := map[string]Job{}
		for _, j := range s.Queue {
			byID[j.ID] = j
		}
		free := map[string]bool{}
		for _, n := range s.Nodes {
			for _, g := range n.GPUs {
				free[fmt.Sprintf("%s/%d", n.ID, g.Index)] = g.Free
			}
		}
		userGPUs, projectGPUs := holdings(s.Running)
		for _, st := range r.Starts {
			j := byID[st.JobID]
			got := 0
			for _, p := range st.Placements {
				got += len(p.GPUs)
				for _, g := range p.GPUs {
					k := fmt.Sprintf("%s/%d", p.NodeID, g)
					if !free[k] {
						fail("job %s took busy or shared GPU %s", j.ID, k)
					}
					free[k] = false
				}
			}
			lo := j.GPUs
			if j.Shrinkable(s.Now) {
				lo = j.GPUsMin
			}
			if j.Nodes <= 1 && (got < lo || got > j.GPUs || len(st.Placements) != 1) {
				fail("job %s (%d-%d, until %v) got %d GPUs on %d nodes", j.ID, j.GPUsMin, j.GPUs, j.ElasticUntil, got, len(st.Placements))
			}
			if !st.Borrowed {
				if q, ok := s.Policy.UserQuotas[j.User]; ok && userGPUs[j.User]+got > q {
					fail("job %s takes user %s past quota %d without borrowing", j.ID, j.User, q)
				}
				if q, ok := s.Policy.ProjectQuotas[j.Project]; ok && projectGPUs[j.Project]+got > q {
					fail("job %s takes project %s past quota %d without borrowing", j.ID, j.Project, q)
				}
			}
			userGPUs[j.User] += got
			projectGPUs[j.Project] += got
		}
		if r.Head != "" && !r.ReservedAt.Equal(never) && s.Policy.Backfill {
			head := byID[r.Head]
			after := append([]Running{}, s.Running...)
			nodes := cloneNodes(s.Nodes)
			for _, st := range r.Starts {
				j := byID[st.JobID]
				after = append(after, Running{ID: j.ID, StartedAt: s.Now, Estimate: j.Estimate, Placements: st.Placements})
				takeUp(nodes, st.Placements)
			}
			ix := newIndex(nodes)
			at, _, ok := newTimeline(ix, after, nil, s.Now).earliest(ix, elasticPlan(&head, s.Now))
			if !ok || at.After(r.ReservedAt) {
				fail("backfill delayed head %s from %v to %v (%v)", head.ID, r.ReservedAt, at, ok)
			}
		}
	}
}
