package orchestrator

import (
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// TestEngineTimeLimit: the task carries the job's time_limit (an engine
// such as Slurm sets its own limit from it), and an attempt its engine
// stopped at that limit (Update.TimedOut, Slurm's TIMEOUT) ends failed
// with reason time_limit, not exit_code.
func TestEngineTimeLimit(t *testing.T) {
	h := startLimited(t, Limits{})
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), TimeLimit: api.RawValue(`"2h"`)})
	task := h.nextStart()
	if task.TimeLimit != 2*time.Hour {
		t.Fatalf("task TimeLimit %s, want 2h", task.TimeLimit)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: time.Now(), PID: 42})
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 143, Signal: "terminated", TimedOut: true})
	got := h.waitState(j.ID, api.StateFailed)
	if got.Reason != api.ReasonTimeLimit {
		t.Fatalf("ended %s %q (%s), want time_limit", got.State, got.Reason, got.Message)
	}
}
