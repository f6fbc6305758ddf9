package limits

import (
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// fakeBooks is the queue as the checks read it.
type fakeBooks struct {
	queued      int
	byUser      map[string]int
	interactive map[string]int
}

func (f fakeBooks) Queued() int                     { return f.queued }
func (f fakeBooks) QueuedBy(user string) int        { return f.byUser[user] }
func (f fakeBooks) InteractiveGPUs(user string) int { return f.interactive[user] }

// TestCheckSubmit: each limit refuses with its code or field, exempt
// submissions pass the per-user queue limit, and time limits get their
// defaults (the interactive one for interactive work).
func TestCheckSubmit(t *testing.T) {
	books := fakeBooks{queued: 3, byUser: map[string]int{"ana": 2}, interactive: map[string]int{"ana": 1}}
	secs := func(d time.Duration) *api.Seconds { s := api.Seconds(d.Seconds()); return &s }
	for _, tc := range []struct {
		name      string
		l         Limits
		job       api.Job
		exempt    bool
		wantCode  string // api.Error's Code, or its Field for a 422
		wantLimit time.Duration
	}{
		{"no limits", Limits{}, api.Job{User: "ana", GPUCount: 8, Nodes: 1}, false, "", 0},
		{"gpus per job", Limits{MaxGPUsPerJob: 4}, api.Job{User: "bob", GPUCount: 4, Nodes: 2}, false, "gpu_count", 0},
		{"default run time", Limits{MaxRunTime: time.Hour}, api.Job{User: "bob", GPUCount: 1, Nodes: 1}, false, "", time.Hour},
		{"run time asked too long", Limits{MaxRunTime: time.Hour}, api.Job{User: "bob", GPUCount: 1, Nodes: 1, TimeLimit: secs(2 * time.Hour)}, false, "time_limit", 0},
		{"queue full", Limits{MaxQueueSize: 3}, api.Job{User: "bob", GPUCount: 1, Nodes: 1}, false, "queue_full", 0},
		{"user's queue full", Limits{MaxQueuedPerUser: 2}, api.Job{User: "ana", GPUCount: 1, Nodes: 1}, false, "user_queue_full", 0},
		{"admin exempt", Limits{MaxQueuedPerUser: 2}, api.Job{User: "ana", GPUCount: 1, Nodes: 1}, true, "", 0},
		{"interactive default", Limits{MaxInteractiveTime: 4 * time.Hour, MaxRunTime: time.Hour}, api.Job{User: "bob", Class: api.ClassInteractive, GPUCount: 1, Nodes: 1}, false, "", time.Hour},
		{"interactive too long", Limits{MaxInteractiveTime: time.Hour}, api.Job{User: "bob", Class: api.ClassInteractive, GPUCount: 1, Nodes: 1, TimeLimit: secs(2 * time.Hour)}, false, "time_limit", 0},
		{"interactive GPUs", Limits{MaxInteractiveGPUs: 2}, api.Job{User: "ana", Class: api.ClassInteractive, GPUCount: 2, Nodes: 1}, false, "interactive_gpus_exceeded", 0},
		{"batch not interactive", Limits{MaxInteractiveGPUs: 2}, api.Job{User: "ana", GPUCount: 2, Nodes: 1}, false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			err := Queue{Limits: tc.l, Books: books}.CheckSubmit(&feature.Submission{Job: &j, Exempt: tc.exempt})
			var ae *api.Error
			switch {
			case tc.wantCode == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantCode != "" && (!errors.As(err, &ae) || ae.Code != tc.wantCode && ae.Field != tc.wantCode):
				t.Fatalf("err = %#v, want %s", err, tc.wantCode)
			}
			if tc.wantLimit > 0 && (j.TimeLimit == nil || j.TimeLimit.Duration() != tc.wantLimit) {
				t.Fatalf("time limit = %v, want %s", j.TimeLimit, tc.wantLimit)
			}
		})
	}
}

// TestCheckHold: a hold counts the user's interactive GPUs, holds included.
func TestCheckHold(t *testing.T) {
	q := Queue{Limits: Limits{MaxInteractiveGPUs: 2}, Books: fakeBooks{interactive: map[string]int{"ana": 1}}}
	if err := q.CheckHold("ana", 1); err != nil {
		t.Fatalf("a second GPU: %v", err)
	}
	if err := q.CheckHold("ana", 2); err == nil {
		t.Fatal("a third GPU: admitted")
	}
	if err := (Queue{Books: fakeBooks{}}).CheckHold("ana", 100); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}
