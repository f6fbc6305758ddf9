package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
)

// A queued or running job's priority can be changed (a running job's
// priority decides whether preemption may stop it for another); a
// finished job's cannot (409 wrong_state). corral priority's help and the
// README say the same.
func TestSetPriorityQueuedAndRunningNotFinished(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	j := h.submit(api.SubmitRequest{Command: "train", GPUCount: gpus(1), User: "ana"})
	if got, err := h.o.SetPriority(ctx, j.ID, api.RawValue(`"high"`)); err != nil || got.Priority != api.PriorityHigh {
		t.Fatalf("queued job: priority %v, %v; want high", got.Priority, err)
	}
	h.nextStart()
	h.waitState(j.ID, api.StateAllocating)
	h.o.Sink(exec.Update{JobID: j.ID, Attempt: 0, Kind: exec.Started, At: time.Now(), PID: 42})
	h.waitState(j.ID, api.StateRunning)
	if got, err := h.o.SetPriority(ctx, j.ID, api.RawValue(`"low"`)); err != nil || got.Priority != api.PriorityLow || got.State != api.StateRunning {
		t.Fatalf("running job: %s priority %v, %v; want running with low", got.State, got.Priority, err)
	}
	h.o.Sink(exec.Update{JobID: j.ID, Attempt: 0, Kind: exec.Exited, At: time.Now()})
	h.waitState(j.ID, api.StateCompleted)
	_, err := h.o.SetPriority(ctx, j.ID, api.RawValue(`"critical"`))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "wrong_state" {
		t.Fatalf("finished job: %v; want 409 wrong_state", err)
	}
	if got := h.waitState(j.ID, api.StateCompleted); got.Priority != api.PriorityLow {
		t.Errorf("a refused change changed the priority to %v", got.Priority)
	}
}
