package limits

import (
	"errors"
	"iter"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature"
)

// fakeBooks is the queue as the checks read it: counts, and the jobs
// that count against the interactive cap.
type fakeBooks struct {
	queued          int
	byUser          map[string]int
	waiting, active []*api.Job
}

func (f fakeBooks) Queued() int                    { return f.queued }
func (f fakeBooks) QueuedBy(user string) int       { return f.byUser[user] }
func (f fakeBooks) QueuedJobs() iter.Seq[*api.Job] { return slices.Values(f.waiting) }
func (f fakeBooks) Active() iter.Seq[*api.Job]     { return slices.Values(f.active) }

// fakeHolds are the holds as the checks read them.
type fakeHolds []*api.Hold

func (f fakeHolds) All() iter.Seq[*api.Hold] { return slices.Values(f) }

// interactive is an interactive job of user's, of gpus whole GPUs.
func interactive(user string, gpus int) *api.Job {
	return &api.Job{User: user, Class: api.ClassInteractive, GPUCount: gpus, Nodes: 1}
}

// TestCheckSubmit: each limit refuses with its code or field, exempt
// submissions pass the per-user queue limit, and time limits get their
// defaults (the interactive one for interactive work).
func TestCheckSubmit(t *testing.T) {
	books := fakeBooks{queued: 3, byUser: map[string]int{"ana": 2}, waiting: []*api.Job{interactive("ana", 1), {User: "ana", GPUCount: 4, Nodes: 1}}}
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

// TestCheckHold: a hold counts the user's interactive GPUs, queued,
// running and held; not batch jobs, nor other users'.
func TestCheckHold(t *testing.T) {
	held := &api.Hold{User: "ana", Allocation: []api.Allocation{{NodeID: "n1", GPUID: 0}}}
	for _, tc := range []struct {
		name  string
		books fakeBooks
		holds fakeHolds
		ask   float64
		ok    bool
	}{
		{"a second GPU, one queued", fakeBooks{waiting: []*api.Job{interactive("ana", 1)}}, nil, 1, true},
		{"a third GPU, one queued", fakeBooks{waiting: []*api.Job{interactive("ana", 1)}}, nil, 2, false},
		{"a second GPU, one running", fakeBooks{active: []*api.Job{interactive("ana", 1)}}, nil, 1, true},
		{"a third GPU, one running and one held", fakeBooks{active: []*api.Job{interactive("ana", 1)}}, fakeHolds{held}, 1, false},
		{"batch jobs do not count", fakeBooks{waiting: []*api.Job{{User: "ana", GPUCount: 8, Nodes: 1}}}, nil, 2, true},
		{"another user's do not count", fakeBooks{active: []*api.Job{interactive("bob", 2)}}, fakeHolds{{User: "bob", Allocation: held.Allocation}}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := Queue{Limits: Limits{MaxInteractiveGPUs: 2}, Books: tc.books, Holds: tc.holds}
			if err := q.CheckHold("ana", tc.ask); (err == nil) != tc.ok {
				t.Fatalf("CheckHold(%v) = %v, want ok %v", tc.ask, err, tc.ok)
			}
		})
	}
	if err := (Queue{Books: fakeBooks{}}).CheckHold("ana", 100); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}

// TestFractionsAgainstInteractiveCap: a slice or share counts its fraction
// of a GPU against --max-interactive-gpus, placed (its allocation) or not
// yet (Asked).
func TestFractionsAgainstInteractiveCap(t *testing.T) {
	slice := api.Allocation{NodeID: "n1", MIG: &api.AllocatedSlice{Profile: "1g.10gb"}, Fraction: 1.0 / 7}
	tests := map[string]struct {
		job  api.Job
		want float64
	}{
		"whole GPUs":           {api.Job{GPUCount: 2, Nodes: 1}, 2},
		"a placed slice":       {api.Job{GPUCount: 1, Nodes: 1, Allocation: []api.Allocation{slice}}, 1.0 / 7},
		"a placed share":       {api.Job{GPUCount: 1, Nodes: 1, Allocation: []api.Allocation{{ShareMiB: 20 << 10, Fraction: 0.25}}}, 0.25},
		"a queued 3g.40gb":     {api.Job{GPUCount: 1, Nodes: 1, GPUPart: api.GPUPart{MIGProfile: "3g.40gb"}}, 3.0 / 7},
		"a queued any slice":   {api.Job{GPUCount: 1, Nodes: 1, GPUPart: api.GPUPart{MIGProfile: "any"}}, 1.0 / 7},
		"a queued share, 25%":  {api.Job{GPUCount: 1, Nodes: 1, GPUPart: api.GPUPart{GPUShareMiB: 10 << 10, GPUCompute: 25}}, 0.25},
		"a queued share, mem":  {api.Job{GPUCount: 1, Nodes: 1, GPUPart: api.GPUPart{GPUShareMiB: 10 << 10}}, 1},
		"a whole job, 2 nodes": {api.Job{GPUCount: 2, Nodes: 2}, 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := JobEquivalents(&tc.job); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("JobEquivalents = %v, want %v", got, tc.want)
			}
		})
	}
	// Six 1g.10gb slices held and a seventh asked fit a cap of 1; an
	// eighth does not, and the refusal says how much is held.
	six := []api.Allocation{slice, slice, slice, slice, slice, slice}
	q := Queue{Limits: Limits{MaxInteractiveGPUs: 1}, Books: fakeBooks{active: []*api.Job{interactive("bob", 1)}},
		Holds: fakeHolds{{User: "ana", Allocation: six}}}
	if err := q.CheckHold("ana", Asked(1, api.GPUPart{MIGProfile: "1g.10gb"})); err != nil {
		t.Fatalf("a seventh slice: %v", err)
	}
	err := q.CheckHold("bob", Asked(1, api.GPUPart{MIGProfile: "1g.10gb"}))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != "interactive_gpus_exceeded" || !strings.Contains(ae.Message, "bob has 1 interactive GPUs") || !strings.Contains(ae.Message, "0.14 more") {
		t.Fatalf("an eighth slice: %v", err)
	}
}
