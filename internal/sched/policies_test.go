package sched

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// jb is a fluent builder for queued jobs in tests.
type jb struct{ Job }

func mk(id string) *jb {
	return &jb{Job{ID: id, User: "u", Project: "p", Priority: 2, GPUs: 1, SubmittedAt: t0, Estimate: time.Hour}}
}
func (b *jb) user(u string) *jb         { b.User = u; return b }
func (b *jb) project(p string) *jb      { b.Project = p; return b }
func (b *jb) prio(p int) *jb            { b.Priority = p; return b }
func (b *jb) gpus(n int) *jb            { b.GPUs = n; return b }
func (b *jb) at(d time.Duration) *jb    { b.SubmittedAt = t0.Add(d); return b }
func (b *jb) est(d time.Duration) *jb   { b.Estimate, b.EstimateGiven = d, true; return b }
func (b *jb) guess(d time.Duration) *jb { b.Estimate, b.EstimateGiven = d, false; return b }
func (b *jb) build() Job                { return b.Job }
func jobs(bs ...*jb) []Job {
	out := []Job{}
	for _, b := range bs {
		out = append(out, b.build())
	}
	return out
}
func ids(js []Job) []string {
	out := []string{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}
func run(id, user string, prio int, node string, started time.Duration, est time.Duration, gpus ...int) Running {
	return Running{ID: id, User: user, Project: "p", Priority: prio, StartedAt: t0.Add(started), Estimate: est,
		Placements: []Placement{{NodeID: node, GPUs: gpus}}}
}

// submitted sets when a running job was submitted, relative to t0.
func submitted(r Running, at time.Duration) Running {
	r.SubmittedAt = t0.Add(at)
	return r
}

func TestPolicyOrder(t *testing.T) {
	h := time.Hour
	tests := map[string]struct {
		policy Policy
		usage  Usage
		queue  []Job
		want   []string
	}{
		"fcfs: submission order": {
			policy: Policy{Name: PolicyFCFS},
			queue:  jobs(mk("b").at(2*h).prio(4), mk("a").at(h), mk("c").at(3*h).prio(1)),
			want:   []string{"a", "b", "c"},
		},
		// Aging 2h per level. Keys (submit - priority x 2h): a = 0-2h, b = 5h-8h = -3h,
		// c = 7h-8h = -1h. The critical job c came 7h after the low job a, more than
		// the 3 levels x 2h between them, so it does not overtake a.
		"priority: aging bounds overtaking": {
			policy: Policy{Name: PolicyPriority},
			queue:  jobs(mk("a").prio(1), mk("b").prio(4).at(5*h), mk("c").prio(4).at(7*h)),
			want:   []string{"b", "a", "c"},
		},
		// Keys (submit + estimate): a = 2h, b = 30m+10m = 40m, c = 30m, d = -4h+3h = -1h.
		"sjf: shortest first, aged": {
			policy: Policy{Name: PolicySJF},
			queue:  jobs(mk("a").guess(2*h), mk("b").at(30*time.Minute).est(10*time.Minute), mk("c").est(30*time.Minute), mk("d").at(-4*h).est(3*h)),
			want:   []string{"d", "c", "b", "a"},
		},
		// ana used 10 GPU-hours with weight 10 (share 3600), bob none (share 0). Each
		// GPU handed out adds 3600 / weight: b1 (bob 3600, ties ana, ana wins on
		// name), a1 (ana 3960), b2 (bob 7200), a2.
		"fair_share: users by decayed usage over weight": {
			policy: Policy{Name: PolicyFairShare, UserWeights: map[string]float64{"ana": 10}},
			usage:  Usage{Users: map[string]float64{"ana": 36000}},
			queue:  jobs(mk("a1").user("ana"), mk("a2").user("ana").at(time.Minute), mk("b1").user("bob").at(2*time.Minute), mk("b2").user("bob").at(3*time.Minute)),
			want:   []string{"b1", "a1", "b2", "a2"},
		},
		"fair_share: projects first, then users": {
			policy: Policy{Name: PolicyFairShare},
			usage:  Usage{Projects: map[string]float64{"vision": 1e6}, Users: map[string]float64{"cy": 1e6}},
			queue:  jobs(mk("v").user("ana").project("vision"), mk("n1").user("cy").project("nlp").at(time.Minute), mk("n2").user("dee").project("nlp").at(2*time.Minute)),
			want:   []string{"n2", "n1", "v"},
		},
		"fair_share: priority within a user": {
			policy: Policy{Name: PolicyFairShare},
			queue:  jobs(mk("low").prio(1), mk("high").prio(3).at(time.Minute)),
			want:   []string{"high", "low"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ids(OrderWithUsage(Snapshot{Now: t0.Add(8 * h), Queue: tc.queue, Usage: tc.usage, Policy: tc.policy}))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFairShareSplitsACycle(t *testing.T) {
	var q []Job
	for i := range 8 {
		q = append(q, mk("a"+string(rune('0'+i))).user("ana").at(time.Duration(i)*time.Second).build())
	}
	for i := range 8 {
		q = append(q, mk("b"+string(rune('0'+i))).user("bob").at(time.Hour+time.Duration(i)*time.Second).build())
	}
	r := Schedule(Snapshot{Now: t0.Add(2 * time.Hour), Nodes: []Node{node("n1", 8, "H100", 80)}, Queue: q, Policy: Policy{Name: PolicyFairShare}})
	per := map[byte]int{}
	for _, s := range r.Starts {
		per[s.JobID[0]]++
	}
	if per['a'] != 4 || per['b'] != 4 {
		t.Fatalf("starts per user = ana %d, bob %d; want 4 and 4", per['a'], per['b'])
	}
}

func TestQuotas(t *testing.T) {
	pol := Policy{Name: PolicyFCFS, Backfill: true, ProjectQuotas: map[string]int{"vision": 4, "nlp": 4}}
	t.Run("idle GPUs are borrowed", func(t *testing.T) {
		r := Schedule(Snapshot{Now: t0.Add(time.Hour), Nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3)},
			Running: []Running{{ID: "v0", User: "ana", Project: "vision", Priority: 2, StartedAt: t0, Estimate: time.Hour,
				Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3}}}}},
			Queue:  jobs(mk("v1").user("ana").project("vision").gpus(2), mk("n1").user("cy").project("nlp").gpus(2).at(time.Minute)),
			Policy: pol})
		if len(r.Starts) != 2 || r.Starts[0].JobID != "n1" || r.Starts[0].Borrowed || r.Starts[1].JobID != "v1" || !r.Starts[1].Borrowed {
			t.Fatalf("starts = %+v", r.Starts)
		}
	})
	t.Run("over quota with nothing idle", func(t *testing.T) {
		r := Schedule(Snapshot{Now: t0.Add(time.Hour), Nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5)},
			Running: []Running{{ID: "v0", User: "ana", Project: "vision", Priority: 2, StartedAt: t0, Estimate: time.Hour,
				Placements: []Placement{{NodeID: "n1", GPUs: []int{0, 1, 2, 3}}}}, run("x", "zed", 2, "n1", 0, time.Hour, 4, 5)},
			Queue:  jobs(mk("v1").user("ana").project("vision").gpus(2), mk("n1").user("cy").project("nlp").gpus(2).at(time.Minute)),
			Policy: pol})
		if len(r.Starts) != 1 || r.Starts[0].JobID != "n1" {
			t.Fatalf("starts = %+v", r.Starts)
		}
		if p := r.Pending[0]; p.JobID != "v1" || p.Reason != ReasonQuota || p.Message() != "project vision over quota: 4 of 4 GPUs in use; no idle GPUs to borrow" {
			t.Fatalf("pending = %+v", r.Pending)
		}
	})
	t.Run("borrowed GPUs are taken back first, preemption off", func(t *testing.T) {
		borrowed := Running{ID: "vb", User: "ana", Project: "vision", Priority: 4, StartedAt: t0, Estimate: 9 * time.Hour, Borrowed: true,
			Placements: []Placement{{NodeID: "n1", GPUs: []int{4, 5, 6, 7}}}}
		r := Schedule(Snapshot{Now: t0.Add(time.Hour), Nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6, 7)},
			Running: []Running{run("v0", "ana", 1, "n1", -time.Hour, 9*time.Hour, 0, 1, 2, 3), borrowed},
			Queue:   jobs(mk("n1").user("cy").project("nlp").gpus(4)),
			Policy:  pol})
		if len(r.Preemptions) != 1 || r.Preemptions[0].JobID != "vb" || r.Preemptions[0].Reason != ReasonReclaim || r.Pending[0].Reason != ReasonPreempting {
			t.Fatalf("preemptions = %+v, pending = %+v", r.Preemptions, r.Pending)
		}
	})
}

func TestPreemption(t *testing.T) {
	full := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6, 7)}
	pol := Policy{Name: PolicyPriority, Preemption: true, MinRunTime: 10 * time.Minute}
	tests := map[string]struct {
		running     []Running
		queue       []Job
		policy      Policy
		usage       Usage
		wantVictims []string
		wantReason  string
	}{
		"most recently started low job goes first": {
			running: []Running{run("old", "a", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3), run("new", "b", 1, "n1", 30*time.Minute, 9*time.Hour, 4, 5, 6, 7)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(4).at(time.Hour)),
			policy:  pol, wantVictims: []string{"new"}, wantReason: ReasonPreempting,
		},
		"never for a job that still would not fit": {
			running: []Running{run("crit", "a", 4, "n1", 0, 9*time.Hour, 0, 1, 2, 3), run("low", "b", 1, "n1", 0, 9*time.Hour, 4, 5, 6, 7)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(8).at(time.Hour)),
			policy:  pol, wantVictims: nil, wantReason: ReasonResources,
		},
		"a job that just started is protected": {
			running: []Running{run("low", "b", 1, "n1", 55*time.Minute, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)),
			policy:  pol, wantVictims: nil, wantReason: ReasonResources,
		},
		"switch off: nobody is preempted": {
			running: []Running{run("low", "b", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)},
			queue:   jobs(mk("hi").user("c").prio(4).gpus(2).at(time.Hour)),
			policy:  Policy{Name: PolicyPriority}, wantVictims: nil, wantReason: ReasonResources,
		},
		// A victim must come after the job it yields to once requeued, or
		// it would take its GPUs straight back and the two would thrash.
		"aging has lifted an old low job above the newcomer: not its victim": {
			running: []Running{submitted(run("old-low", "b", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), -10*time.Hour)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)), // aged key 1h-3x2h = -5h; old-low's -10h-2h = -12h
			policy:  pol, wantVictims: nil, wantReason: ReasonResources,
		},
		"a low job behind the newcomer in the queue is its victim": {
			running: []Running{submitted(run("low", "b", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), 0)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)), // -5h against low's -2h
			policy:  pol, wantVictims: []string{"low"}, wantReason: ReasonPreempting,
		},
		"under fcfs an earlier job is not preempted for priority": {
			running: []Running{submitted(run("low", "b", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), 0)},
			queue:   jobs(mk("hi").user("c").prio(4).gpus(2).at(time.Hour)),
			policy:  Policy{Name: PolicyFCFS, Preemption: true, MinRunTime: 10 * time.Minute}, wantVictims: nil, wantReason: ReasonResources,
		},
		"equal priority is not preempted": {
			running: []Running{run("peer", "b", 3, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)),
			policy:  pol, wantVictims: nil, wantReason: ReasonResources,
		},
		"jobs already stopping are waited for, not doubled": {
			running: []Running{func() Running {
				r := run("going", "b", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3)
				r.Preempting = true
				return r
			}(), run("low2", "d", 1, "n1", 0, 9*time.Hour, 4, 5, 6, 7)},
			queue:  jobs(mk("hi").user("c").prio(3).gpus(4).at(time.Hour)),
			policy: pol, wantVictims: nil, wantReason: ReasonPreempting,
		},
		"fair share: an under-share user takes from an over-share one": {
			running:     []Running{run("hog", "ana", 2, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)},
			queue:       jobs(mk("b1").user("bob").gpus(2).at(time.Hour)),
			policy:      Policy{Name: PolicyFairShare, Preemption: true, MinRunTime: 10 * time.Minute},
			usage:       Usage{Users: map[string]float64{"ana": 8 * 3600}}, // the hog's hour so far
			wantVictims: []string{"hog"}, wantReason: ReasonPreempting,
		},
		// Under fair_share a victim must still stand no lower than the job
		// it yields to once its GPUs are gone and the job holds them, or
		// it would be served first when they come free and take them back.
		"fair share: not a job whose user, requeued, would be served first": {
			running:     []Running{run("hog", "ana", 2, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)},
			queue:       jobs(mk("b1").user("bob").gpus(2).at(time.Hour)),
			policy:      Policy{Name: PolicyFairShare, Preemption: true, MinRunTime: 10 * time.Minute},
			usage:       Usage{Users: map[string]float64{"ana": 3600}}, // ana at 0 GPUs would stand below bob at 2
			wantVictims: nil, wantReason: ReasonResources,
		},
		"fair share: a higher priority does not take from a user served first": {
			running:     []Running{run("low", "ana", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)},
			queue:       jobs(mk("hi").user("bob").prio(4).gpus(2).at(time.Hour)),
			policy:      Policy{Name: PolicyFairShare, Preemption: true, MinRunTime: 10 * time.Minute},
			usage:       Usage{Users: map[string]float64{"ana": 8 * 3600, "bob": 50 * 3600}},
			wantVictims: nil, wantReason: ReasonResources,
		},
		"fair share: a higher priority takes from a user served after it": {
			running:     []Running{run("low", "ana", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)},
			queue:       jobs(mk("hi").user("bob").prio(4).gpus(2).at(time.Hour)),
			policy:      Policy{Name: PolicyFairShare, Preemption: true, MinRunTime: 10 * time.Minute},
			usage:       Usage{Users: map[string]float64{"ana": 50 * 3600, "bob": 8 * 3600}},
			wantVictims: []string{"low"}, wantReason: ReasonPreempting,
		},
		// A user's own job yields to their own higher-priority job (as in
		// Slurm or Kueue), under the same rule that it queue behind it.
		"a user's own lower-priority job yields to their higher-priority one": {
			running: []Running{submitted(run("mine", "c", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), 0)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)),
			policy:  pol, wantVictims: []string{"mine"}, wantReason: ReasonPreempting,
		},
		"fair share: a user's own lower-priority job yields too": {
			running:     []Running{submitted(run("mine", "c", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), 0)},
			queue:       jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)),
			policy:      Policy{Name: PolicyFairShare, Preemption: true, MinRunTime: 10 * time.Minute, AgingInterval: 2 * time.Hour},
			usage:       Usage{Users: map[string]float64{"c": 8 * 3600}},
			wantVictims: []string{"mine"}, wantReason: ReasonPreempting,
		},
		"a user's own job of equal priority does not yield": {
			running: []Running{submitted(run("mine", "c", 3, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), 0)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)),
			policy:  pol, wantVictims: nil, wantReason: ReasonResources,
		},
		"a user's own job that aging lifted above the newcomer does not yield": {
			running: []Running{submitted(run("mine", "c", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), -10*time.Hour)},
			queue:   jobs(mk("hi").user("c").prio(3).gpus(2).at(time.Hour)),
			policy:  pol, wantVictims: nil, wantReason: ReasonResources,
		},
		"fair share: a user's own job in another project does not yield": {
			running: []Running{func() Running {
				r := submitted(run("mine", "c", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7), 0)
				r.Project = "vision"
				return r
			}()},
			queue:       jobs(mk("hi").user("c").project("nlp").prio(3).gpus(2).at(time.Hour)),
			policy:      Policy{Name: PolicyFairShare, Preemption: true, MinRunTime: 10 * time.Minute, AgingInterval: 2 * time.Hour},
			wantVictims: nil, wantReason: ReasonResources,
		},
		"fair share across projects: the projects' standing decides": {
			running: []Running{func() Running {
				r := run("low", "ana", 1, "n1", 0, 9*time.Hour, 0, 1, 2, 3, 4, 5, 6, 7)
				r.Project = "vision"
				return r
			}()},
			queue:  jobs(mk("hi").user("bob").project("nlp").prio(4).gpus(2).at(time.Hour)),
			policy: Policy{Name: PolicyFairShare, Preemption: true, MinRunTime: 10 * time.Minute},
			// ana stands far above bob, but vision below nlp: vision is served first
			usage:       Usage{Users: map[string]float64{"ana": 90 * 3600}, Projects: map[string]float64{"vision": 8 * 3600, "nlp": 90 * 3600}},
			wantVictims: nil, wantReason: ReasonResources,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: t0.Add(time.Hour), Nodes: full, Running: tc.running, Queue: tc.queue, Policy: tc.policy, Usage: tc.usage})
			var victims []string
			for _, p := range r.Preemptions {
				victims = append(victims, p.JobID)
			}
			if !reflect.DeepEqual(victims, tc.wantVictims) {
				t.Fatalf("victims = %v, want %v", victims, tc.wantVictims)
			}
			if len(r.Starts) != 0 || r.Pending[0].Reason != tc.wantReason {
				t.Fatalf("starts %+v, pending %+v; want reason %s", r.Starts, r.Pending, tc.wantReason)
			}
		})
	}
}

func TestBackfill(t *testing.T) {
	now := t0.Add(time.Hour)
	nodes := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5)}
	running := []Running{run("r1", "a", 2, "n1", 0, 2*time.Hour, 0, 1, 2, 3), run("r2", "a", 2, "n1", 0, 4*time.Hour, 4, 5)}
	// The 8-GPU head can start at t0+4h, when r2 ends: the reservation.
	queue := jobs(mk("head").gpus(8).at(time.Minute), mk("long").gpus(2).at(2*time.Minute).est(5*time.Hour),
		mk("unknown").gpus(2).at(3*time.Minute), mk("short").gpus(2).at(4*time.Minute).est(30*time.Minute))
	t.Run("on", func(t *testing.T) {
		r := Schedule(Snapshot{Now: now, Nodes: nodes, Running: running, Queue: queue, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
		if len(r.Starts) != 1 || r.Starts[0].JobID != "short" {
			t.Fatalf("starts = %+v, want only the short job", r.Starts)
		}
		if r.Head != "head" || !r.ReservedAt.Equal(t0.Add(4*time.Hour)) {
			t.Fatalf("reservation = %s at %v", r.Head, r.ReservedAt)
		}
		want := map[string]string{"head": ReasonResources, "long": ReasonBackfillReserved, "unknown": ReasonBackfillReserved}
		for _, p := range r.Pending {
			if p.Reason != want[p.JobID] {
				t.Errorf("%s: %s (%s), want %s", p.JobID, p.Reason, p.Message(), want[p.JobID])
			}
		}
		if m := r.Pending[2].Message(); !strings.Contains(m, "holds a reservation until 13:00 UTC") || !strings.Contains(m, "estimated_duration") {
			t.Errorf("message = %q", m)
		}
	})
	t.Run("off", func(t *testing.T) {
		r := Schedule(Snapshot{Now: now, Nodes: nodes, Running: running, Queue: queue, Policy: Policy{Name: PolicyFCFS}})
		if len(r.Starts) != 0 || r.Pending[1].Reason != ReasonBehindHead {
			t.Fatalf("starts = %+v, pending = %+v", r.Starts, r.Pending)
		}
	})
	t.Run("estimates", func(t *testing.T) {
		s := Snapshot{Now: now, Nodes: nodes, Running: running, Queue: queue, Policy: Policy{Name: PolicyFCFS, Backfill: true}}
		est := EstimateStarts(s, Schedule(s), DefaultPlanDepth)
		// head at 4h; then long and unknown each need 2 GPUs after the head's
		// 1h estimate ends at 5h.
		want := map[string]time.Time{"head": t0.Add(4 * time.Hour), "long": t0.Add(5 * time.Hour), "unknown": t0.Add(5 * time.Hour)}
		if !reflect.DeepEqual(est, want) {
			t.Fatalf("estimates = %v, want %v", est, want)
		}
	})
}

func TestTopologyAndSpread(t *testing.T) {
	pairs := func(id string, busy ...int) Node {
		n := node(id, 8, "H100", 80, busy...)
		for g := range n.GPUs {
			n.GPUs[g].Domain = g / 2
		}
		return n
	}
	t.Run("an NVLink pair on the node", func(t *testing.T) {
		r := Schedule(Snapshot{Now: t0, Nodes: []Node{pairs("n1", 0, 2, 4, 5)}, Queue: jobs(mk("j").gpus(2)), Policy: Policy{Name: PolicyFCFS}})
		if got := r.Starts[0].Placements[0].GPUs; !reflect.DeepEqual(got, []int{6, 7}) {
			t.Fatalf("GPUs = %v, want the free pair 6,7", got)
		}
	})
	t.Run("a connected set beats a fuller node", func(t *testing.T) {
		r := Schedule(Snapshot{Now: t0, Nodes: []Node{pairs("split", 0, 2, 4, 6), pairs("pair", 0, 1, 2)}, Queue: jobs(mk("j").gpus(2)), Policy: Policy{Name: PolicyFCFS}})
		if p := r.Starts[0].Placements[0]; p.NodeID != "pair" || !reflect.DeepEqual(p.GPUs, []int{4, 5}) {
			t.Fatalf("placement = %+v", p)
		}
	})
	t.Run("spread", func(t *testing.T) {
		nodes := []Node{node("full", 8, "H100", 80, 0, 1, 2, 3, 4, 5), node("empty", 8, "H100", 80)}
		best := Schedule(Snapshot{Now: t0, Nodes: nodes, Queue: jobs(mk("j")), Policy: Policy{Name: PolicyFCFS}})
		spread := Schedule(Snapshot{Now: t0, Nodes: nodes, Queue: jobs(mk("j")), Policy: Policy{Name: PolicyFCFS, Spread: true}})
		if best.Starts[0].Placements[0].NodeID != "full" || spread.Starts[0].Placements[0].NodeID != "empty" {
			t.Fatalf("best fit on %s, spread on %s", best.Starts[0].Placements[0].NodeID, spread.Starts[0].Placements[0].NodeID)
		}
	})
}

// TestFairSharePreemptsOnlyToEvenShares: erin holds all 8 GPUs, fred asks
// for 8: fair share preempts 4 (4/4), and in the next cycle, with those 4
// still stopping, none more.
func TestFairSharePreemptsOnlyToEvenShares(t *testing.T) {
	now := t0.Add(time.Hour)
	var running []Running
	for g := range 8 {
		running = append(running, run(fmt.Sprintf("e%d", g), "erin", 2, "n1", 0, 9*time.Hour, g))
	}
	var queue []Job
	for i := range 8 {
		queue = append(queue, mk(fmt.Sprintf("f%d", i)).user("fred").at(time.Duration(i)*time.Second).build())
	}
	pol := Policy{Name: PolicyFairShare, Preemption: true}
	nodes := []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3, 4, 5, 6, 7)}
	r := Schedule(Snapshot{Now: now, Nodes: nodes, Running: running, Queue: queue, Policy: pol})
	if len(r.Preemptions) != 4 {
		t.Fatalf("first cycle preempted %d jobs, want 4", len(r.Preemptions))
	}
	for _, p := range r.Preemptions {
		for i := range running {
			if running[i].ID == p.JobID {
				running[i].Preempting = true
			}
		}
	}
	r = Schedule(Snapshot{Now: now.Add(time.Second), Nodes: nodes, Running: running, Queue: queue, Policy: pol})
	if len(r.Preemptions) != 0 {
		t.Fatalf("second cycle preempted %d more jobs, want none", len(r.Preemptions))
	}
}

func TestLabelsAndBackoff(t *testing.T) {
	a, b := node("a", 8, "H100", 80), node("b", 8, "H100", 80)
	b.Labels = map[string]string{"zone": "west", "ib": "yes"}
	west := mk("west").gpus(2).build()
	west.NodeLabels = map[string]string{"zone": "west"}
	nowhere := mk("nowhere").at(time.Minute).build()
	nowhere.NodeLabels = map[string]string{"zone": "mars"}
	later := mk("later").at(2 * time.Minute).build()
	later.NotBefore = t0.Add(2 * time.Hour)
	r := Schedule(Snapshot{Now: t0.Add(time.Hour), Nodes: []Node{a, b}, Queue: []Job{west, nowhere, later}, Policy: Policy{Name: PolicyFCFS, Backfill: true}})
	if len(r.Starts) != 1 || r.Starts[0].JobID != "west" || r.Starts[0].Placements[0].NodeID != "b" {
		t.Fatalf("starts = %+v, want the west job on b", r.Starts)
	}
	reasons := map[string]string{}
	for _, p := range r.Pending {
		reasons[p.JobID] = p.Reason
	}
	if reasons["nowhere"] != ReasonUnsatisfiable || reasons["later"] != ReasonBackoff {
		t.Fatalf("reasons = %v", reasons)
	}
}
