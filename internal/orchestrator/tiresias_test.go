package orchestrator

import (
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/feature/runtimes"
	"github.com/corral-sched/corral/internal/sched"
)

// Under sjf, a queued job with neither a given nor a learned estimate is
// ordered by the GPU time its earlier attempts attained (Tiresias): one
// that has run long already goes after a fresh one, and a fresh one goes
// before a job whose estimate is long. schedJob fills NoEstimate and
// Attained from the job; the core orders.
func TestSJFOrdersJobsWithoutEstimateByAttainedService(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	hour := api.Seconds(3600)
	tests := []struct {
		name  string
		old   api.Job // submitted first
		fresh api.Job // submitted ten minutes later, never ran
		want  string  // the one that starts on the only 8 free GPUs
	}{
		{"neither ran: submission order", api.Job{}, api.Job{}, "old"},
		{"the older attained 8 GPU-hours", api.Job{GPUSeconds: 8 * 3600, RetryCount: 1}, api.Job{}, "fresh"},
		{"the older attained 5 GPU-minutes", api.Job{GPUSeconds: 300, RetryCount: 1}, api.Job{}, "old"},
		{"the older has a given estimate of 1h", api.Job{EstimatedDuration: &hour}, api.Job{}, "fresh"},
		{"the fresh one has a given estimate of 1h", api.Job{}, api.Job{EstimatedDuration: &hour}, "old"},
	}
	fallback := func(string) (time.Duration, string) { return time.Hour, runtimes.BasisFallback }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			est := runtimes.New(nil).Estimator(t0.Add(time.Hour), fallback)
			old, fresh := tc.old, tc.fresh
			old.ID, old.User, old.SubmittedAt = "old", "ana", t0
			fresh.ID, fresh.User, fresh.SubmittedAt = "fresh", "bob", t0.Add(10*time.Minute)
			for _, j := range []*api.Job{&old, &fresh} {
				j.State, j.GPUCount, j.Command = api.StateQueued, 8, "train"
			}
			node := sched.Node{ID: "n1", Schedulable: true}
			for g := range 8 {
				node.GPUs = append(node.GPUs, sched.GPU{Index: g, Model: "H100", MemoryMiB: 80 << 10, Free: true})
			}
			snap := sched.Snapshot{Now: t0.Add(time.Hour), Nodes: []sched.Node{node},
				Policy: sched.Policy{Name: sched.PolicySJF}, Queue: []sched.Job{schedJob(&old, est), schedJob(&fresh, est)}}
			if snap.Queue[0].NoEstimate != (old.EstimatedDuration == nil) || snap.Queue[1].NoEstimate != (fresh.EstimatedDuration == nil) {
				t.Fatalf("NoEstimate = %v, %v", snap.Queue[0].NoEstimate, snap.Queue[1].NoEstimate)
			}
			if want := time.Duration(old.GPUSeconds) * time.Second; snap.Queue[0].Attained != want {
				t.Fatalf("Attained = %v, want %v", snap.Queue[0].Attained, want)
			}
			res := sched.Schedule(snap)
			if len(res.Starts) != 1 || res.Starts[0].JobID != tc.want {
				t.Fatalf("starts = %+v, want %s", res.Starts, tc.want)
			}
		})
	}
}
