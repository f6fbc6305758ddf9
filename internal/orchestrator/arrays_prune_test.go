package orchestrator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// --keep-history prunes a done array whole once its last task ended before
// the kept time: its record, every task, their logs and their counts; an
// array not done (one task still queued) is kept whole, tasks that ended
// included.
func TestPruneDoneArray(t *testing.T) {
	h := start(t, "", nil)
	ctx := context.Background()
	done := h.submit(api.SubmitRequest{Command: "sweep", GPUCount: gpus(1), Array: "0-3"}).ArrayJobID
	for _, st := range h.takeStarts(4) {
		os.MkdirAll(filepath.Join(h.o.cfg.DataDir, "logs", st.JobID), 0o700)
		h.run(st.JobID, 0, time.Now())
		h.waitState(st.JobID, api.StateCompleted)
	}
	h.o.SetScheduling(ctx, false)
	live := h.submit(api.SubmitRequest{Command: "b", GPUCount: gpus(1), Array: "0-1"}).ArrayJobID
	if _, _, err := h.o.Cancel(ctx, live+"_0", 0); err != nil {
		t.Fatal(err)
	}
	countsBefore := h.o.JobStateCounts()

	if n, err := h.o.PruneOnce(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruning what ended before an hour ago: %d, %v; want nothing", n, err)
	}
	if n, err := h.o.PruneOnce(ctx, time.Now().Add(time.Hour)); err != nil || n != 4 {
		t.Fatalf("pruned %d, %v; want the done array's 4 tasks", n, err)
	}
	if _, err := h.o.FeatureOps().Arrays.Get(done); err == nil {
		t.Error("the pruned array still answers")
	}
	for i := range 4 {
		id := done + "_" + strconv.Itoa(i)
		if _, err := h.o.Job(id); err == nil {
			t.Errorf("pruned task %s still answers", id)
		}
		if _, err := os.Stat(filepath.Join(h.o.cfg.DataDir, "logs", id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pruned task %s's logs: %v", id, err)
		}
	}
	if c := h.o.JobStateCounts(); c[api.StateCompleted] != countsBefore[api.StateCompleted]-4 {
		t.Errorf("completed jobs counted %d after pruning, %d before: want 4 fewer", c[api.StateCompleted], countsBefore[api.StateCompleted])
	}
	if a, err := h.o.FeatureOps().Arrays.Get(live); err != nil || a.Counts.Canceled != 1 || a.Counts.Queued != 1 {
		t.Errorf("the array not done: %+v, %v; want it whole", a.Counts, err)
	}
}
