package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestCancelRunningJob cancels a job that ignores SIGTERM: it gets SIGTERM
// first, the grace period is honoured, then SIGKILL ends its whole process
// group, and its GPUs come back. Cancels of queued and finished jobs answer
// at once.
func TestCancelRunningJob(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child.pid")
	shellPID := filepath.Join(dir, "shell.pid")
	ready := filepath.Join(dir, "ready")

	// The shell traps TERM (prints got-term and goes back to waiting); its
	// child, a background sleep, ignores TERM. Only SIGKILL ends them.
	cmd := fmt.Sprintf(`trap 'echo got-term' TERM
echo $$ > %s
(trap '' TERM; exec sleep 1000) &
echo $! > %s
echo started
: > %s
while :; do wait; done
echo not-reached`, shellQuote(shellPID), shellQuote(childPID), shellQuote(ready))
	j := s.submit(map[string]any{"command": cmd, "gpu_count": 4, "name": "stubborn"})
	s.waitState(j.ID, api.StateRunning, 30*time.Second)
	waitFor(t, 30*time.Second, func() string { return "the job to write its ready file" }, func() bool { return fileExists(ready) })
	shell := readPIDs(t, shellPID)[0]
	child := readPIDs(t, childPID)[0]
	if processGone(shell) || processGone(child) {
		t.Fatalf("the job's processes are not running before the cancel")
	}
	if c := s.cluster(); c.AllocatedGPUs != 4 {
		t.Fatalf("the running job holds %d GPUs, want 4", c.AllocatedGPUs)
	}

	cancelAt := time.Now()
	r := s.do("DELETE", "/queue/"+j.ID+"?grace=1s", nil, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("DELETE of a running job: want 202, got %s", r)
	}
	var ack api.Job
	if err := json.Unmarshal(r.Body, &ack); err != nil || ack.ID != j.ID {
		t.Fatalf("DELETE answer: %v %s", err, r.Body)
	}
	if ack.State.Terminal() {
		t.Errorf("the job is %s at once although it ignores SIGTERM", ack.State)
	}

	// A second cancel while it is stopping is not an error.
	if r := s.do("DELETE", "/queue/"+j.ID+"?grace=1s", nil, nil); r.Status != http.StatusAccepted && r.Status != http.StatusOK {
		t.Errorf("second DELETE while stopping: want 202 or 200, got %s", r)
	}

	done := s.waitState(j.ID, api.StateCanceled, 30*time.Second)
	if done.FinishedAt == nil {
		t.Fatalf("a canceled job needs finished_at")
	}
	if took := done.FinishedAt.Sub(cancelAt); took < 900*time.Millisecond {
		t.Errorf("the job ended %v after the cancel: the 1s grace period was not honoured", took)
	}
	last := done.Events[len(done.Events)-1]
	if last.From != api.StateRunning || last.To != api.StateCanceled || last.Reason == "" || done.Reason != last.Reason {
		t.Errorf("last event: want running -> canceled with a reason, got %+v (job reason %q)", last, done.Reason)
	}

	out := s.logs(j.ID)
	if !strings.Contains(out, "got-term") {
		t.Errorf("the job never saw SIGTERM; log %q", out)
	}
	if strings.Contains(out, "not-reached") {
		t.Errorf("the job ran to its end; log %q", out)
	}

	// The whole process group is gone (init may reap the orphan late).
	waitFor(t, 10*time.Second, func() string {
		return fmt.Sprintf("the job's shell %d and its child %d to be gone", shell, child)
	}, func() bool { return processGone(shell) && processGone(child) })
	s.waitAllGPUsFree(10 * time.Second)

	// A finished job cannot be canceled: 409.
	r = s.do("DELETE", "/queue/"+j.ID, nil, nil)
	if r.Status != http.StatusConflict {
		t.Errorf("DELETE of a canceled job: want 409, got %s", r)
	} else {
		errorBody(t, r)
	}
	fin := s.submit(map[string]any{"command": "true", "gpu_count": 1})
	s.waitState(fin.ID, api.StateCompleted, 30*time.Second)
	r = s.do("DELETE", "/queue/"+fin.ID, nil, nil)
	if r.Status != http.StatusConflict {
		t.Errorf("DELETE of a completed job: want 409, got %s", r)
	} else if e := errorBody(t, r); !strings.Contains(e.Message, "completed") {
		t.Errorf("the 409 should say the job is completed: %q", e.Message)
	}
	if got := s.job(fin.ID); got.State != api.StateCompleted {
		t.Errorf("a refused cancel changed the job to %s", got.State)
	}

	// A queued job (all GPUs held) is canceled at once: 200.
	var h api.Hold
	s.mustJSON("POST", "/cluster/gpu-allocate", map[string]any{"job_id": "hold-all", "gpu_count": 8}, http.StatusCreated, &h)
	q := s.submit(map[string]any{"command": "echo should-not-run", "gpu_count": 1})
	s.waitJob(q.ID, 30*time.Second, "to wait for GPUs", func(j api.Job) bool {
		if j.State != api.StateQueued {
			t.Fatalf("job %s is %s while every GPU is held", j.ID, j.State)
		}
		return j.PendingReason != ""
	})
	var canceled api.Job
	s.mustJSON("DELETE", "/queue/"+q.ID, nil, http.StatusOK, &canceled)
	if canceled.State != api.StateCanceled || canceled.FinishedAt == nil {
		t.Errorf("DELETE of a queued job: want canceled with finished_at at once, got %s (finished %v)", canceled.State, canceled.FinishedAt)
	}
	if got := s.job(q.ID); got.State != api.StateCanceled || got.StartedAt != nil {
		t.Errorf("the canceled queued job: state %s, started_at %v", got.State, got.StartedAt)
	}
	var qr api.QueueResponse
	s.mustJSON("GET", "/queue", nil, http.StatusOK, &qr)
	if len(qr.QueuedJobs) != 0 {
		t.Errorf("the queue still lists %d jobs after the cancel", len(qr.QueuedJobs))
	}
	s.mustJSON("POST", "/cluster/gpu-release", map[string]any{"job_id": "hold-all"}, http.StatusOK, nil)
	s.waitAllGPUsFree(10 * time.Second)
	if got := s.job(q.ID); got.State != api.StateCanceled {
		t.Errorf("the canceled job is %s after the GPUs came back", got.State)
	}
	if out := s.logs(q.ID); strings.Contains(out, "should-not-run") {
		t.Errorf("the canceled queued job ran")
	}
}
