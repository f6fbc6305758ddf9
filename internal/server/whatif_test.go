package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
	"github.com/corral-sched/corral/internal/exec"
	"github.com/corral-sched/corral/internal/orchestrator"
)

// waitJobState waits until the job is in state (the orchestrator says
// when anything changed).
func waitJobState(t *testing.T, o *orchestrator.Orchestrator, id string, state api.State) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := o.Changed()
		if j, err := o.Job(id); err == nil && j.State == state {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			j, _ := o.Job(id)
			t.Fatalf("job %s is %s; want %s", id, j.State, state)
		}
	}
}

// GET /queue and GET /jobs/{id} give a queued job's start as a range with
// the basis of its estimate, and GET /jobs/{id}/what-if?gpus=N answers
// for other GPU counts, 422 naming the field for what it cannot answer.
func TestQueueRangesAndWhatIf(t *testing.T) {
	ts, o := newServerWith(t, idleExec{}, slog.New(slog.DiscardHandler))
	submit := func(gpus int) string {
		t.Helper()
		resp, b := call(t, ts, "POST", "/queue/submit", fmt.Sprintf(`{"name":"sweep","command":"python sweep.py","gpu_count":%d}`, gpus))
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("submit: %d %s", resp.StatusCode, b)
		}
		var a api.SubmitAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		return a.Job.ID
	}
	base := time.Now().Add(-3 * time.Hour)
	for _, ran := range []time.Duration{30 * time.Minute, 40 * time.Minute, 50 * time.Minute} {
		id := submit(2)
		waitJobState(t, o, id, api.StateAllocating)
		o.Sink(exec.Update{JobID: id, Kind: exec.Started, At: base})
		o.Sink(exec.Update{JobID: id, Kind: exec.Exited, At: base.Add(ran)})
		waitJobState(t, o, id, api.StateCompleted)
	}
	big := submit(8)
	waitJobState(t, o, big, api.StateAllocating)
	started := time.Now().UTC().Truncate(time.Second)
	o.Sink(exec.Update{JobID: big, Kind: exec.Started, At: started})
	waitJobState(t, o, big, api.StateRunning)
	q := submit(2)

	var row api.QueuedJob
	deadline := time.Now().Add(10 * time.Second)
	for row.EstimatedStartHigh == nil && time.Now().Before(deadline) {
		ch := o.Changed()
		_, b := call(t, ts, "GET", "/queue", "")
		var qr api.QueueResponse
		if err := json.Unmarshal(b, &qr); err != nil {
			t.Fatal(err)
		}
		for _, r := range qr.QueuedJobs {
			if r.ID == q {
				row = r
			}
		}
		if row.EstimatedStartHigh == nil {
			<-ch
		}
	}
	if row.EstimatedStartLow == nil || row.EstimatedStartHigh == nil || row.EstimatedStartTime == nil {
		t.Fatalf("queue row %+v; want a start with its range", row)
	}
	if !row.EstimatedStartLow.Equal(started.Add(30*time.Minute)) || !row.EstimatedStartHigh.Equal(started.Add(50*time.Minute)) {
		t.Errorf("range %v to %v; want %v to %v", row.EstimatedStartLow, row.EstimatedStartHigh, started.Add(30*time.Minute), started.Add(50*time.Minute))
	}
	if row.EstimateBasis != "from 3 runs of sweep by root" {
		t.Errorf("basis %q", row.EstimateBasis)
	}
	var j api.Job
	_, b := call(t, ts, "GET", "/jobs/"+q, "")
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if j.EstimatedStartHigh == nil || !j.EstimatedStartHigh.Equal(*row.EstimatedStartHigh) || j.EstimateBasis != row.EstimateBasis {
		t.Errorf("GET /jobs/%s: high %v, basis %q; want the queue's", q, j.EstimatedStartHigh, j.EstimateBasis)
	}

	resp, b := call(t, ts, "GET", "/jobs/"+q+"/what-if?gpus=4", "")
	var w api.WhatIf
	if err := json.Unmarshal(b, &w); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("what-if: %d %s", resp.StatusCode, b)
	}
	if w.GPUs != 4 || w.CurrentGPUs != 2 || w.StartsNow || w.EstimatedStartHigh == nil || !w.EstimatedStartHigh.Equal(*row.EstimatedStartHigh) {
		t.Errorf("what-if 4 GPUs = %+v; want the same wait behind the 8-GPU sweep", w)
	}
	for _, c := range []struct{ path, field string }{
		{"/jobs/" + q + "/what-if?gpus=0", "gpus"},
		{"/jobs/" + q + "/what-if?gpus=9", "gpus"},
		{"/jobs/" + q + "/what-if?gpus=four", "gpus"},
		{"/jobs/" + q + "/what-if", "gpus"},
		{"/jobs/" + big + "/what-if?gpus=2", "id"},
	} {
		resp, b := call(t, ts, "GET", c.path, "")
		var e api.ErrorBody
		if err := json.Unmarshal(b, &e); resp.StatusCode != http.StatusUnprocessableEntity || err != nil || e.Error.Field != c.field {
			t.Errorf("GET %s: %d %s; want 422 naming %s", c.path, resp.StatusCode, b, c.field)
		}
	}
	if j, _ := o.Job(q); j.GPUCount != 2 || j.State != api.StateQueued {
		t.Errorf("after what-if: %+v; want it unchanged", j)
	}
}
