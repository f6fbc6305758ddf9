package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/feature/runtimes"
)

// Learned run times on the live server: three runs of ana's "sweep"
// (30, 40 and 50 minutes) make the estimate of her next one; a job
// queued behind a running sweep gets its start as a range (the running
// one's low end, point and high end) and the basis; a restart keeps what
// was learned (the runs table), and the what-if answer plans the job
// with other GPU counts without changing anything.
func TestLearnedEstimates(t *testing.T) {
	h := start(t, "", nil)
	base := time.Now().Add(-3 * time.Hour)
	sweep := func(n int) api.SubmitRequest {
		return api.SubmitRequest{Name: "sweep", Command: "python sweep.py", GPUCount: gpus(n), User: "ana"}
	}
	for i, ran := range []time.Duration{30 * time.Minute, 40 * time.Minute, 50 * time.Minute} {
		j := h.submit(sweep(2))
		if task := h.nextStart(); task.JobID != j.ID {
			t.Fatalf("run %d: started %s, want %s", i, task.JobID, j.ID)
		}
		h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Started, At: base})
		h.o.Sink(exec.Update{JobID: j.ID, Kind: exec.Exited, At: base.Add(ran)})
		h.waitState(j.ID, api.StateCompleted)
	}
	// A sweep on all 8 GPUs runs; another waits behind it.
	big := h.submit(sweep(8))
	h.nextStart()
	started := time.Now().UTC().Truncate(time.Second)
	h.o.Sink(exec.Update{JobID: big.ID, Kind: exec.Started, At: started})
	h.waitState(big.ID, api.StateRunning)
	q := h.submit(sweep(2))
	h.waitCycle()
	const basis = "from 3 runs of sweep by ana"
	var row api.QueuedJob
	for _, r := range h.o.Queue().QueuedJobs {
		if r.ID == q.ID {
			row = r
		}
	}
	if row.EstimatedStartTime == nil || row.EstimatedStartLow == nil || row.EstimatedStartHigh == nil {
		t.Fatalf("queue row %+v: want a start with its range", row)
	}
	for name, c := range map[string]struct {
		got  time.Time
		want time.Duration
	}{
		"start": {*row.EstimatedStartTime, 40 * time.Minute},
		"low":   {*row.EstimatedStartLow, 30 * time.Minute},
		"high":  {*row.EstimatedStartHigh, 50 * time.Minute},
	} {
		if !c.got.Equal(started.Add(c.want)) {
			t.Errorf("%s %v; want the running sweep's start + %v (%v)", name, c.got, c.want, started.Add(c.want))
		}
	}
	if row.EstimateBasis != basis {
		t.Errorf("basis %q; want %q", row.EstimateBasis, basis)
	}
	if j, _ := h.o.Job(q.ID); j.EstimateBasis != basis || j.EstimatedStartLow == nil || !j.EstimatedStartLow.Equal(*row.EstimatedStartLow) {
		t.Errorf("job %s: basis %q, low %v; want the queue's", q.ID, j.EstimateBasis, j.EstimatedStartLow)
	}

	// What if it asked for fewer GPUs, or more than fit? Nothing changes.
	ctx := context.Background()
	w, err := h.o.WhatIf(ctx, q.ID, 2)
	if err != nil || w.EstimatedStartTime == nil || !w.EstimatedStartTime.Equal(*row.EstimatedStartTime) {
		t.Errorf("what-if 2 GPUs = %+v, %v; want the plan's start %v", w, err, row.EstimatedStartTime)
	}
	for _, c := range []struct {
		id   string
		gpus int
	}{{q.ID, 0}, {q.ID, 9}, {big.ID, 2}} {
		if _, err := h.o.WhatIf(ctx, c.id, c.gpus); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("what-if %s with %d GPUs: %v; want a 422", c.id, c.gpus, err)
		}
	}
	if j, _ := h.o.Job(q.ID); j.GPUCount != 2 || j.State != api.StateQueued {
		t.Errorf("after what-if: %+v; want it unchanged", j)
	}

	// A restart keeps the learned estimates.
	h.stop()
	h.stop = nil
	h2 := start(t, h.path, func(map[string]bool) (int, error) { return 0, nil })
	j, err := h2.o.Job(q.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.EstimateBasis != basis {
		t.Errorf("after a restart: basis %q; want %q (not %q)", j.EstimateBasis, basis, runtimes.BasisFallback)
	}
}
