package jobbook

import (
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/sched"
)

func TestSchedJob(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	wait := api.Seconds(600)
	for _, tc := range []struct {
		name  string
		job   api.Job
		check func(sched.Job) bool
	}{
		{"who and what", api.Job{ID: "a", User: "ana", Project: "p", Priority: api.PriorityHigh, GPUCount: 2, Nodes: 1, GPUMemoryGB: 1.5, GPUType: "H100", GPUPart: api.GPUPart{MIGProfile: "1g.10gb", GPUShareMiB: 512, GPUCompute: 30}},
			func(s sched.Job) bool {
				return s.ID == "a" && s.User == "ana" && s.Project == "p" && s.Priority == int(api.PriorityHigh) && s.GPUs == 2 && s.Nodes == 1 &&
					s.MinMemoryMiB == 1536 && s.GPUType == "H100" && s.MIGProfile == "1g.10gb" && s.ShareMiB == 512 && s.ShareCompute == 30
			}},
		{"earlier attempts' GPU time", api.Job{GPUSeconds: 90.5}, func(s sched.Job) bool { return s.Attained == 90500*time.Millisecond }},
		{"a backoff", api.Job{NotBefore: at(time.Hour)}, func(s sched.Job) bool { return s.NotBefore.Equal(t0.Add(time.Hour)) && !s.Begin }},
		{"--begin after the backoff", api.Job{NotBefore: at(time.Hour), JobIO: api.JobIO{Begin: at(2 * time.Hour)}}, func(s sched.Job) bool { return s.NotBefore.Equal(t0.Add(2*time.Hour)) && s.Begin }},
		{"--begin before the backoff", api.Job{NotBefore: at(2 * time.Hour), JobIO: api.JobIO{Begin: at(time.Hour)}}, func(s sched.Job) bool { return s.NotBefore.Equal(t0.Add(2*time.Hour)) && !s.Begin }},
		{"not elastic", api.Job{GPUCount: 8, SubmittedAt: t0}, func(s sched.Job) bool { return s.GPUsMin == 0 && s.ElasticUntil.IsZero() }},
		{"elastic, no wait", api.Job{GPUCount: 8, GPUCountMin: 4, SubmittedAt: t0}, func(s sched.Job) bool { return s.GPUsMin == 4 && s.ElasticUntil.Equal(t0) }},
		{"elastic with a wait", api.Job{GPUCount: 8, GPUCountMin: 4, SubmittedAt: t0, ElasticWait: &wait}, func(s sched.Job) bool { return s.GPUsMin == 4 && s.ElasticUntil.Equal(t0.Add(10*time.Minute)) }},
	} {
		if got := SchedJob(&tc.job); !tc.check(got) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

func TestQueuedAt(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	submitted := api.Job{SubmittedAt: t0}
	requeued := api.Job{SubmittedAt: t0, Events: []api.Event{
		{At: t0, To: api.StateQueued}, {At: t0.Add(time.Minute), To: api.StateRunning}, {At: t0.Add(time.Hour), To: api.StateQueued}}}
	if got := QueuedAt(&submitted); !got.Equal(t0) {
		t.Errorf("submitted: %v, want %v", got, t0)
	}
	if got := QueuedAt(&requeued); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("requeued: %v, want %v", got, t0.Add(time.Hour))
	}
}

func TestPending(t *testing.T) {
	var b Pending
	if _, ok := b.Get("a"); ok {
		t.Fatal("an empty book has a reason")
	}
	b.Reset([]sched.Pending{{JobID: "a", Reason: "resources"}, {JobID: "b", Reason: "priority"}})
	if p, ok := b.Get("b"); !ok || p.Reason != "priority" {
		t.Fatalf("b: %+v %v", p, ok)
	}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	b.Plan(map[string]sched.StartRange{"b": {At: t0}}, t0)
	if sr, ok := b.Start("b"); !ok || !sr.At.Equal(t0) || !b.Planned().Equal(t0) {
		t.Fatalf("b's start: %+v %v, planned %v", sr, ok, b.Planned())
	}
	b.Drop("b")
	if _, ok := b.Get("b"); ok {
		t.Fatal("b still has a reason after Drop")
	}
	if _, ok := b.Start("b"); ok {
		t.Fatal("b still has a start after Drop")
	}
	b.Reset([]sched.Pending{{JobID: "c", Reason: "resources"}})
	if _, ok := b.Get("a"); ok {
		t.Fatal("a keeps the last cycle's reason")
	}
	if p, ok := b.Get("c"); !ok || p.Reason != "resources" {
		t.Fatalf("c: %+v %v", p, ok)
	}
}

func TestSchedRunning(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	started := t0.Add(-time.Hour)
	alloc := []api.Allocation{{NodeID: "n1", GPUID: 2}, {NodeID: "n1", GPUID: 3}}
	for _, tc := range []struct {
		name  string
		job   api.Job
		check func(sched.Running) bool
	}{
		{"not started yet: now", api.Job{ID: "a", User: "ana", Allocation: alloc}, func(r sched.Running) bool {
			return r.ID == "a" && r.User == "ana" && r.StartedAt.Equal(t0) && len(r.Placements) == 1 && len(r.Placements[0].GPUs) == 2
		}},
		{"started", api.Job{StartedAt: &started, Borrowed: true, Preempting: true, Idle: true, Class: "interactive"}, func(r sched.Running) bool {
			return r.StartedAt.Equal(started) && r.Borrowed && r.Preempting && r.Idle && r.Class == "interactive"
		}},
	} {
		if got := SchedRunning(&tc.job, t0); !tc.check(got) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}
