package sched

import (
	"strings"
	"testing"
	"time"
)

// TestClasses: an interactive job is never a victim (priority, fair share,
// reclaim, idleness), and never borrows beyond a quota; an
// interactive-preemptible job borrows and is preempted like a batch job.
func TestClasses(t *testing.T) {
	h := time.Hour
	with := func(r Running, class string, borrowed, idle bool) Running {
		r.Class, r.Borrowed, r.Idle = class, borrowed, idle
		return r
	}
	full := []Node{node("n1", 2, "A100", 80, 0, 1)}
	tests := map[string]struct {
		policy      Policy
		nodes       []Node
		running     []Running
		queue       []Job
		wantStart   []string
		wantVictims []string
		wantReason  map[string]string // pending job -> reason
		wantNote    string            // a substring of the first pending job's message
	}{
		"priority: a batch victim is preempted": {
			policy:      Policy{Name: PolicyPriority, Preemption: true},
			nodes:       full,
			running:     []Running{run("r", "bob", 1, "n1", -h, h, 0, 1)},
			queue:       jobs(mk("j").user("ana").prio(4).gpus(2)),
			wantVictims: []string{"r"},
		},
		"priority: an interactive job is never a victim": {
			policy:     Policy{Name: PolicyPriority, Preemption: true},
			nodes:      full,
			running:    []Running{with(run("r", "bob", 1, "n1", -h, h, 0, 1), ClassInteractive, false, false)},
			queue:      jobs(mk("j").user("ana").prio(4).gpus(2)),
			wantReason: map[string]string{"j": ReasonResources},
		},
		"priority: interactive-preemptible is a victim": {
			policy:      Policy{Name: PolicyPriority, Preemption: true},
			nodes:       full,
			running:     []Running{with(run("r", "bob", 1, "n1", -h, h, 0, 1), ClassInteractivePreemptible, false, false)},
			queue:       jobs(mk("j").user("ana").prio(4).gpus(2)),
			wantVictims: []string{"r"},
		},
		"only the batch job of two is preempted": {
			policy: Policy{Name: PolicyPriority, Preemption: true},
			nodes:  full,
			running: []Running{with(run("i", "bob", 1, "n1", -h, h, 0), ClassInteractive, false, false),
				run("b", "bob", 1, "n1", -2*h, h, 1)},
			queue:       jobs(mk("j").user("ana").prio(4).gpus(1)),
			wantVictims: []string{"b"},
		},
		"reclaim: a borrowed interactive job is not taken back": {
			policy:     Policy{Name: PolicyFCFS, UserQuotas: map[string]int{"ana": 2}},
			nodes:      full,
			running:    []Running{with(run("r", "bob", 2, "n1", -h, h, 0, 1), ClassInteractive, true, false)},
			queue:      jobs(mk("j").user("ana").gpus(2)),
			wantReason: map[string]string{"j": ReasonResources},
		},
		"idle: an idle interactive job is not preempted as batch idleness": {
			policy:     Policy{Name: PolicyFCFS, PreemptIdle: true},
			nodes:      full,
			running:    []Running{with(run("r", "bob", 2, "n1", -h, h, 0, 1), ClassInteractive, false, true)},
			queue:      jobs(mk("j").user("ana").gpus(2)),
			wantReason: map[string]string{"j": ReasonResources},
		},
		"idle: an idle batch job is preempted": {
			policy:      Policy{Name: PolicyFCFS, PreemptIdle: true},
			nodes:       full,
			running:     []Running{with(run("r", "bob", 2, "n1", -h, h, 0, 1), "", false, true)},
			queue:       jobs(mk("j").user("ana").gpus(2)),
			wantVictims: []string{"r"},
		},
		"quota: interactive over quota waits, never borrows": {
			policy:     Policy{Name: PolicyFCFS, UserQuotas: map[string]int{"ana": 1}},
			nodes:      []Node{node("n1", 4, "A100", 80)},
			queue:      jobs(func() *jb { b := mk("j").user("ana").gpus(2); b.Class = ClassInteractive; return b }()),
			wantReason: map[string]string{"j": ReasonQuota},
			wantNote:   "interactive jobs never borrow",
		},
		"quota: interactive-preemptible over quota borrows idle GPUs": {
			policy:    Policy{Name: PolicyFCFS, UserQuotas: map[string]int{"ana": 1}},
			nodes:     []Node{node("n1", 4, "A100", 80)},
			queue:     jobs(func() *jb { b := mk("j").user("ana").gpus(2); b.Class = ClassInteractivePreemptible; return b }()),
			wantStart: []string{"j"},
		},
		"quota: interactive within quota starts": {
			policy:    Policy{Name: PolicyFCFS, UserQuotas: map[string]int{"ana": 2}},
			nodes:     []Node{node("n1", 4, "A100", 80)},
			queue:     jobs(func() *jb { b := mk("j").user("ana").gpus(2); b.Class = ClassInteractive; return b }()),
			wantStart: []string{"j"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := Schedule(Snapshot{Now: t0, Nodes: tc.nodes, Running: tc.running, Queue: tc.queue, Policy: tc.policy})
			var starts, victims []string
			for _, s := range res.Starts {
				starts = append(starts, s.JobID)
			}
			for _, p := range res.Preemptions {
				victims = append(victims, p.JobID)
			}
			if strings.Join(starts, ",") != strings.Join(tc.wantStart, ",") {
				t.Errorf("starts = %v, want %v", starts, tc.wantStart)
			}
			if strings.Join(victims, ",") != strings.Join(tc.wantVictims, ",") {
				t.Errorf("victims = %v, want %v", victims, tc.wantVictims)
			}
			for _, p := range res.Pending {
				if want, ok := tc.wantReason[p.JobID]; ok && p.Reason != want {
					t.Errorf("%s: reason %q (%s), want %q", p.JobID, p.Reason, p.Message(), want)
				}
			}
			if tc.wantNote != "" && (len(res.Pending) == 0 || !strings.Contains(res.Pending[0].Message(), tc.wantNote)) {
				t.Errorf("pending = %+v, want a message with %q", res.Pending, tc.wantNote)
			}
		})
	}
}
