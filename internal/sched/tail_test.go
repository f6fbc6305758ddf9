package sched

import (
	"slices"
	"testing"
	"time"
)

// Under fair_share a job whose given estimate is at least the backlog,
// and that has waited TailWait of it, goes before every other, the
// longest first; young, short or unestimated jobs keep the fair-share
// order.
func TestTailJobsComeFirst(t *testing.T) {
	h := time.Hour
	heavy := Usage{Users: map[string]float64{"heavy": 1e7, "light": 0}, Projects: map[string]float64{"p": 0}}
	now := t0.Add(100 * h)
	// One 8-GPU node, the light user's 1-GPU job of an hour and the heavy
	// user's long job: the backlog is (long + 1h) / 8.
	tests := map[string]struct {
		policy Policy
		queue  []Job
		left   int64 // Snapshot.LeftOutWork
		want   []string
	}{
		"a long job that waited goes first": {
			policy: Policy{Name: PolicyFairShare},
			queue:  jobs(mk("long").user("heavy").at(90*h).est(100*h), mk("l1").user("light").at(99*h).est(h)),
			want:   []string{"long", "l1"},
		},
		"the longest first": {
			policy: Policy{Name: PolicyFairShare},
			queue: jobs(mk("long").user("heavy").at(80*h).est(100*h), mk("longer").user("heavy").at(90*h).est(150*h),
				mk("l1").user("light").at(99*h).est(h)),
			want: []string{"longer", "long", "l1"},
		},
		"not yet waited 2% of its estimate": {
			policy: Policy{Name: PolicyFairShare},
			queue:  jobs(mk("long").user("heavy").at(99*h).est(100*h), mk("l1").user("light").at(99*h).est(h)),
			want:   []string{"l1", "long"},
		},
		"TailWait negative: at once": {
			policy: Policy{Name: PolicyFairShare, TailWait: -1},
			queue:  jobs(mk("long").user("heavy").at(99*h).est(100*h), mk("l1").user("light").at(99*h).est(h)),
			want:   []string{"long", "l1"},
		},
		"shorter than the backlog the caller left out": {
			policy: Policy{Name: PolicyFairShare},
			queue:  jobs(mk("long").user("heavy").at(90*h).est(100*h), mk("l1").user("light").at(99*h).est(h)),
			left:   8 * 3600 * 200,
			want:   []string{"l1", "long"},
		},
		"a guessed estimate is never on the tail": {
			policy: Policy{Name: PolicyFairShare},
			queue:  jobs(mk("long").user("heavy").at(90*h).guess(100*h), mk("l1").user("light").at(99*h).est(h)),
			want:   []string{"l1", "long"},
		},
		"TailFactor negative: never": {
			policy: Policy{Name: PolicyFairShare, TailFactor: -1},
			queue:  jobs(mk("long").user("heavy").at(90*h).est(100*h), mk("l1").user("light").at(99*h).est(h)),
			want:   []string{"l1", "long"},
		},
		"TailFactor 20: the backlog times 20": {
			policy: Policy{Name: PolicyFairShare, TailFactor: 20},
			queue:  jobs(mk("long").user("heavy").at(90*h).est(100*h), mk("l1").user("light").at(99*h).est(h)),
			want:   []string{"l1", "long"},
		},
		"other policies: no tail": {
			policy: Policy{Name: PolicyFCFS},
			queue:  jobs(mk("long").user("heavy").at(90*h).est(100*h), mk("l1").user("light").at(80*h).est(h)),
			want:   []string{"l1", "long"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Schedule(Snapshot{Now: now, Nodes: []Node{node("n1", 8, "H100", 80)}, Queue: tc.queue,
				Usage: heavy, Policy: tc.policy, LeftOutWork: tc.left})
			var got []string
			for _, s := range r.Starts {
				got = append(got, s.JobID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("starts %v, want %v", got, tc.want)
			}
		})
	}
}

// TailCut is the backlog over every GPU: the queue's given estimates,
// the left-out work and the running jobs' time left, times TailFactor.
func TestTailCut(t *testing.T) {
	h := time.Hour
	now := t0.Add(10 * h)
	running := []Running{run("r1", "x", 2, "n1", 8*h, 6*h, 0, 1, 2, 3)} // 4 h left on 4 GPUs
	queue := jobs(mk("a").gpus(2).est(8*h), mk("b").guess(100*h))       // 16 GPU-hours, and none
	for _, tc := range []struct {
		factor float64
		left   int64
		want   time.Duration
	}{{0, 0, 4 * h}, {1, 0, 4 * h}, {2, 0, 8 * h}, {1, 8 * 3600, 5 * h}} {
		got, ok := TailCut(&Snapshot{Now: now, Nodes: []Node{node("n1", 8, "H100", 80, 0, 1, 2, 3)}, Queue: queue, Running: running,
			Policy: Policy{Name: PolicyFairShare, TailFactor: tc.factor}, LeftOutWork: tc.left})
		if !ok || got != tc.want {
			t.Fatalf("factor %v, left %d: cut %v %v, want %v", tc.factor, tc.left, got, ok, tc.want)
		}
	}
	if _, ok := TailCut(&Snapshot{Now: now, Policy: Policy{Name: PolicySJF}}); ok {
		t.Fatal("sjf has a tail")
	}
}

// A job that has run before is never on the tail: were it, a job fair
// share preempted would take its GPUs straight back from the job it was
// preempted for, and be preempted again (thrash).
func TestOnTailNotAfterARun(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	p := Policy{Name: PolicyFairShare}
	for _, c := range []struct {
		name     string
		attained time.Duration
		want     bool
	}{
		{"never ran", 0, true},
		{"preempted once", time.Minute, false},
	} {
		j := Job{ID: "j", GPUs: 1, Estimate: 10 * time.Hour, EstimateGiven: true, SubmittedAt: now.Add(-time.Hour), Attained: c.attained}
		if got := OnTail(&j, time.Hour, now, &p); got != c.want {
			t.Errorf("%s: OnTail = %v; want %v", c.name, got, c.want)
		}
	}
}
