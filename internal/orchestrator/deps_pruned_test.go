package orchestrator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestPruneKeepsPredecessors: --keep-history leaves an ended job that a
// waiting job depends on, and prunes the rest. A predecessor deleted all
// the same (an older corral pruned it) is, after a restart, an unknown
// outcome: afterok on it can never be met, afterany is.
func TestPruneKeepsPredecessors(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	pred := h.submit(api.SubmitRequest{Command: "a", GPUCount: gpus(1)})
	h.finish(h.nextStart())
	other := h.submit(api.SubmitRequest{Command: "b", GPUCount: gpus(1)})
	h.finish(h.nextStart())
	h.o.SetScheduling(ctx, false)
	ok := h.submit(api.SubmitRequest{Command: "c", GPUCount: gpus(1), DependsOn: "afterok:" + pred.ID})
	anyDep := h.submit(api.SubmitRequest{Command: "d", GPUCount: gpus(1), DependsOn: "afterany:" + pred.ID})

	if n, err := h.o.PruneOnce(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v: want only the job nobody waits for", n, err)
	}
	if _, err := h.o.cfg.Store.Job(ctx, other.ID); err == nil {
		t.Fatalf("job %s, which nobody waits for, was kept", other.ID)
	}
	if j, err := h.o.cfg.Store.Job(ctx, pred.ID); err != nil || j.State != api.StateCompleted {
		t.Fatalf("the predecessor after pruning: %v %v; want it kept, completed", j.State, err)
	}

	// An older corral prunes it anyway; then this one starts again.
	if gone, err := h.o.cfg.Store.PruneFinished(ctx, time.Now().Add(time.Hour), 10, nil); err != nil || len(gone) != 1 {
		t.Fatalf("deleting the predecessor: %v %v", gone, err)
	}
	path := h.path
	h.stop()
	h.stop = nil
	h = start(t, path, nil)
	h.o.SetScheduling(ctx, true)
	if task := h.nextStart(); task.JobID != anyDep.ID {
		t.Fatalf("started %s; want %s (afterany on a job that ended, whatever its outcome)", task.JobID, anyDep.ID)
	}
	j := h.waitPending(ok.ID, api.ReasonDependencyNeverSatisfied)
	if !strings.Contains(j.PendingMessage, "deleted") {
		t.Errorf("pending message %q does not say the predecessor's record was deleted", j.PendingMessage)
	}
}
