package orchestrator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/sched"
)

// One user's five jobs without GPUs, with a cap of 2, run two at a time:
// the other three wait with reason user_cpu_job_limit, another user's
// job still starts, and when one of the first two ends the next starts.
func TestCPUJobsPerUserCap(t *testing.T) {
	h := startConfig(t, "", Config{Nodes: []Node{simNode("n1", 8)}, Tick: time.Hour, MaxRunningCPUJobsPerUser: 2})
	var ana []api.Job
	for i := range 5 {
		ana = append(ana, h.submit(api.SubmitRequest{Command: fmt.Sprintf("prep %d", i), GPUCount: gpus(0), User: "ana"}))
	}
	for i := range 2 {
		if got := h.nextStart(); got.JobID != ana[i].ID {
			t.Fatalf("start %d: job %s (%s), want %s", i, got.JobID, got.Command, ana[i].ID)
		}
		h.o.Sink(exec.Update{JobID: ana[i].ID, Kind: exec.Started, At: time.Now(), PID: 100 + i})
		h.waitState(ana[i].ID, api.StateRunning)
	}
	h.noStart()
	for _, j := range ana[2:] {
		got, err := h.o.Job(j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.StateQueued || got.PendingReason != sched.ReasonUserCPUJobLimit ||
			!strings.Contains(got.PendingMessage, "user ana has 2 jobs without GPUs running; the limit is 2 per user") {
			t.Fatalf("job %s: %s, pending %q: %q", j.ID, got.State, got.PendingReason, got.PendingMessage)
		}
	}
	bob := h.submit(api.SubmitRequest{Command: "bob's prep", GPUCount: gpus(0), User: "bob"})
	if got := h.nextStart(); got.JobID != bob.ID {
		t.Fatalf("started %s (%s), want bob's %s", got.JobID, got.Command, bob.ID)
	}
	// Ana's GPU jobs are not capped.
	train := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(1), User: "ana"})
	if got := h.nextStart(); got.JobID != train.ID {
		t.Fatalf("started %s (%s), want ana's GPU job %s", got.JobID, got.Command, train.ID)
	}
	h.o.Sink(exec.Update{JobID: ana[0].ID, Kind: exec.Exited, At: time.Now(), ExitCode: 0})
	h.waitState(ana[0].ID, api.StateCompleted)
	if got := h.nextStart(); got.JobID != ana[2].ID {
		t.Fatalf("after one ended: started %s (%s), want %s", got.JobID, got.Command, ana[2].ID)
	}
	h.noStart()
}
