package orchestrator

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// TestResourceLimits: mem_mib and cpus are checked (422 naming the
// field), kept on the job and handed to the executor; a failure after an
// OOM kill ends the job out_of_memory.
func TestResourceLimits(t *testing.T) {
	h := startLimited(t, Limits{})
	for _, tc := range []struct {
		name  string
		req   api.SubmitRequest
		field string
	}{
		{"negative mem", api.SubmitRequest{MemMiB: ptr(int64(-1))}, "mem_mib"},
		{"absurd mem", api.SubmitRequest{MemMiB: ptr(int64(1) << 40)}, "mem_mib"},
		{"negative cpus", api.SubmitRequest{CPUs: ptr(-2.0)}, "cpus"},
		{"NaN cpus", api.SubmitRequest{CPUs: ptr(math.NaN())}, "cpus"},
		{"infinite cpus", api.SubmitRequest{CPUs: ptr(math.Inf(1))}, "cpus"},
		{"absurd cpus", api.SubmitRequest{CPUs: ptr(1e6)}, "cpus"},
		{"tiny cpus", api.SubmitRequest{CPUs: ptr(0.001)}, "cpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Command, tc.req.GPUCount = "x", gpus(0)
			_, _, err := h.o.Submit(context.Background(), tc.req, "")
			if !errors.Is(err, api.ErrInvalid) || api.AsError(err).Field != tc.field {
				t.Fatalf("err %v, want 422 on %s", err, tc.field)
			}
		})
	}
	j := h.submit(api.SubmitRequest{Command: "x", GPUCount: gpus(1), MemMiB: ptr(int64(64 << 10)), CPUs: ptr(8.0)})
	if j.MemMiB != 64<<10 || j.CPUs != 8 {
		t.Fatalf("job limits %d MiB, %v CPUs", j.MemMiB, j.CPUs)
	}
	task := h.nextStart()
	if task.MemMiB != 64<<10 || task.CPUs != 8 {
		t.Fatalf("task limits %d MiB, %v CPUs", task.MemMiB, task.CPUs)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: time.Now(), PID: 42})
	h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: time.Now(), ExitCode: 137, Signal: "killed", OOMKilled: true})
	got := h.waitState(j.ID, api.StateFailed)
	if got.Reason != api.ReasonOutOfMemory {
		t.Fatalf("ended %s %q (%s), want out_of_memory", got.State, got.Reason, got.Message)
	}
}

// TestExitOutcomeOOM: an OOM kill names the failure only when the job
// failed and was not canceled or stopped at its time limit.
func TestExitOutcomeOOM(t *testing.T) {
	for _, tc := range []struct {
		job    api.Job
		code   int
		reason string
	}{
		{api.Job{}, 137, api.ReasonOutOfMemory},
		{api.Job{}, 0, api.ReasonExited},
		{api.Job{CancelRequested: true}, 137, api.ReasonCanceled},
		{api.Job{TimedOut: true}, 137, api.ReasonTimeLimit},
	} {
		if _, reason, _ := exitOutcome(&tc.job, tc.code, "", nil, true); reason != tc.reason {
			t.Errorf("%+v exit %d: reason %q, want %q", tc.job, tc.code, reason, tc.reason)
		}
	}
}
