package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// These tests drive the job classes, holds and idle reclaim
// (docs/interactive.md) on a live `corral up --simulate-gpus 8`.

// TestInteractiveNeverPreempted: under the priority policy with
// preemption on, a critical job that needs 6 of the 8 GPUs preempts the
// six one-GPU batch jobs, not the low-priority interactive job that started
// last (which, being the most recent, would be the cheapest victim), and
// the interactive job keeps running.
func TestInteractiveNeverPreempted(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	s.setPolicies(map[string]any{"policy": "priority", "preemption": true, "min_run_time": 0, "preempt_grace": "1s"})
	var batch []string
	for i := range 6 {
		j := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1, "user": "bob", "priority": "low",
			"name": fmt.Sprintf("batch-%d", i), "max_retries": 1})
		batch = append(batch, j.ID)
	}
	for _, id := range batch {
		s.waitState(id, api.StateRunning, 20*time.Second)
	}
	in := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 2, "user": "ana", "priority": "low", "class": "interactive"})
	if in.Class != api.ClassInteractive {
		t.Fatalf("class = %q", in.Class)
	}
	s.waitState(in.ID, api.StateRunning, 20*time.Second)

	hi := s.submit(map[string]any{"command": "true", "gpu_count": 6, "user": "carl", "priority": "critical"})
	s.waitState(hi.ID, api.StateCompleted, 30*time.Second)
	for _, id := range batch {
		if j := s.job(id); j.Preemptions != 1 {
			t.Errorf("batch job %s: %d preemptions, want 1 (state %s)", j.Name, j.Preemptions, j.State)
		}
	}
	if j := s.job(in.ID); j.State != api.StateRunning || j.Preemptions != 0 || j.Preempting {
		t.Errorf("interactive job: %s, %d preemptions, preempting %v; want running, never preempted", j.State, j.Preemptions, j.Preempting)
	}
	release(t, dir, "all")
	s.waitTerminal(in.ID, 20*time.Second)
}

// TestInteractiveCaps: the class is checked at submission (422 naming
// class; the CLI's usage error); a user's third interactive GPU is refused
// with a message naming --max-interactive-gpus; an interactive job's time
// limit defaults to --max-interactive-time and may not pass it.
func TestInteractiveCaps(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	r := s.do("POST", "/queue/submit", map[string]any{"command": "true", "class": "urgent"}, nil)
	if e := errorBody(t, r); r.Status != http.StatusUnprocessableEntity || e.Field != "class" {
		t.Errorf("class urgent: %d %+v, want 422 naming class", r.Status, e)
	}
	if _, stderr, code := runCLI(t, env, "submit", "--class", "urgent", "true"); code != 2 || !strings.Contains(stderr, "--class") {
		t.Errorf("corral submit --class urgent: exit %d, %q; want a usage error (2)", code, stderr)
	}
	stdout, stderr, code := runCLI(t, env, "-o", "json", "submit", "--class", "interactive", "--gpus", "2", "--user", "ana", "sleep", "30")
	if code != 0 {
		t.Fatalf("first two interactive GPUs: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `"class": "interactive"`) || !strings.Contains(stdout, `"time_limit": 28800`) {
		t.Errorf("interactive job: %s; want class interactive and the 8h time limit", stdout)
	}
	_, stderr, code = runCLI(t, env, "submit", "--class", "interactive-preemptible", "--gpus", "1", "--user", "ana", "sleep", "30")
	if code == 0 || !strings.Contains(stderr, "--max-interactive-gpus") {
		t.Errorf("third interactive GPU: exit %d, %q; want a refusal naming --max-interactive-gpus", code, stderr)
	}
	r = s.do("POST", "/queue/submit", map[string]any{"command": "true", "class": "interactive", "user": "ana", "gpu_count": 1}, nil)
	if r.Status != http.StatusTooManyRequests {
		t.Errorf("third interactive GPU over the API: %s, want 429", r)
	}
	r = s.do("POST", "/queue/submit", map[string]any{"command": "true", "class": "interactive", "user": "bob", "gpu_count": 1, "time_limit": "9h"}, nil)
	if e := errorBody(t, r); r.Status != http.StatusUnprocessableEntity || e.Field != "time_limit" {
		t.Errorf("interactive 9h: %d %+v, want 422 naming time_limit", r.Status, e)
	}
	// Batch work is not capped.
	s.submit(map[string]any{"command": "true", "user": "ana", "gpu_count": 4})
}

// allocate POSTs /cluster/gpu-allocate.
func (s *server) allocate(body map[string]any) (response, api.Hold) {
	s.t.Helper()
	var h api.Hold
	r := s.do("POST", "/cluster/gpu-allocate", body, nil)
	if r.Status < 300 {
		if err := json.Unmarshal(r.Body, &h); err != nil {
			s.t.Fatalf("hold answer: %v: %s", err, r)
		}
	}
	return r, h
}

// TestHoldWaitAndExpiry: with the cluster full, a hold answers 409, and
// with "wait": true is queued (202, a job id to poll); it is granted when
// GPUs free and ends at its duration. An immediate hold is named in the
// why-pending of a job it blocks, and its GPUs go to that job when it
// expires.
func TestHoldWaitAndExpiry(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	var fill []string
	for i := range 8 {
		fill = append(fill, s.submit(map[string]any{"command": holdCmd(dir, fmt.Sprint(i)), "gpu_count": 1}).ID)
	}
	for _, id := range fill {
		s.waitState(id, api.StateRunning, 20*time.Second)
	}
	if r, _ := s.allocate(map[string]any{"job_id": "nb", "gpu_count": 2}); r.Status != http.StatusConflict {
		t.Fatalf("hold on a full cluster: %s, want 409", r)
	}
	r, h := s.allocate(map[string]any{"job_id": "nb", "gpu_count": 2, "wait": true, "duration": "3s"})
	if r.Status != http.StatusAccepted || !h.Queued || h.Name != "nb" || h.Poll != "/queue/"+h.JobID {
		t.Fatalf("hold with wait: %s", r)
	}
	j := s.job(h.JobID)
	if j.State != api.StateQueued || j.Class != api.ClassInteractive || j.Hold != "nb" {
		t.Fatalf("the queued hold: %s class %q hold %q", j.State, j.Class, j.Hold)
	}
	release(t, dir, "0")
	release(t, dir, "1")
	j = s.waitState(h.JobID, api.StateRunning, 20*time.Second)
	if len(j.Allocation) != 2 {
		t.Fatalf("granted hold holds %d GPUs", len(j.Allocation))
	}
	j = s.waitTerminal(h.JobID, 20*time.Second)
	if j.State != api.StateCompleted || j.StartedAt == nil || j.FinishedAt.Sub(*j.StartedAt) < 2500*time.Millisecond {
		t.Fatalf("the hold ended %s (%s) after %v; want completed at its 3s duration", j.State, j.Message, j.FinishedAt.Sub(*j.StartedAt))
	}

	// An immediate hold of the 2 free GPUs, then a job that needs 3.
	r, held := s.allocate(map[string]any{"job_id": "debug", "gpu_count": 2, "duration": "4s"})
	if r.Status != http.StatusCreated || held.ExpiresAt == nil {
		t.Fatalf("immediate hold: %s", r)
	}
	release(t, dir, "2")
	big := s.submit(map[string]any{"command": "true", "gpu_count": 3})
	j = s.waitJob(big.ID, 10*time.Second, "to wait naming the hold", func(j api.Job) bool {
		return strings.Contains(j.PendingMessage, "'s hold debug until")
	})
	if j.State != api.StateQueued {
		t.Fatalf("big job %s", j.State)
	}
	s.waitState(big.ID, api.StateCompleted, 20*time.Second)
	if r := s.do("POST", "/cluster/gpu-release", map[string]any{"job_id": "debug"}, nil); r.Status != http.StatusNotFound {
		t.Errorf("release after expiry: %s, want 404", r)
	}
	release(t, dir, "all")
}

// TestIdleReclaim: an interactive job with nothing attached whose GPUs
// read under the class's idle_threshold (100%: the simulated GPUs read
// 85-97%) is warned (idle_ends_at, still running) and then ends canceled
// with reason idle; a batch job beside it keeps running. The server checks
// at its 5 s tick: the warning comes 8 s before the end so that a tick
// falls between them.
func TestIdleReclaim(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	r := s.do("PUT", "/orchestrator/policies", map[string]any{"classes": map[string]any{"interactive": map[string]any{"idle_window": "8h"}}}, nil)
	if e := errorBody(t, r); r.Status != http.StatusUnprocessableEntity || e.Field != "classes.interactive.idle_window" {
		t.Errorf("an idle window as long as --max-interactive-time: %d %+v, want 422", r.Status, e)
	}
	env := []string{"CORRAL_SERVER=" + s.URL}
	if _, stderr, code := runCLI(t, env, "policy", "set", "--preempt-grace", "1s", "--class", "interactive",
		"--class-idle-threshold", "100", "--class-idle-window", "12s", "--class-idle-warn", "8s"); code != 0 {
		t.Fatalf("corral policy set --class: exit %d: %s", code, stderr)
	}
	if stdout, _, _ := runCLI(t, env, "policy", "get"); !strings.Contains(stdout, "nothing attached and under 100% for 12s; warned 8s before") {
		t.Errorf("corral policy get:\n%s", stdout)
	}
	if _, stderr, code := runCLI(t, env, "policy", "set", "--class-idle-window", "4s"); code != 2 || !strings.Contains(stderr, "--class") {
		t.Errorf("--class-idle-window without --class: exit %d, %q; want a usage error", code, stderr)
	}
	b := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1})
	in := s.submit(map[string]any{"command": holdCmd(dir, "all"), "gpu_count": 1, "class": "interactive"})
	s.waitState(in.ID, api.StateRunning, 20*time.Second)
	warned := s.waitJob(in.ID, 30*time.Second, "to be warned", func(j api.Job) bool { return j.IdleEndsAt != nil || j.State.Terminal() })
	if warned.State != api.StateRunning {
		t.Fatalf("not warned before its end: %s %q", warned.State, warned.Reason)
	}
	end := s.waitTerminal(in.ID, 30*time.Second)
	if end.State != api.StateCanceled || end.Reason != api.ReasonIdle {
		t.Fatalf("ended %s %q (%s); want canceled, reason idle", end.State, end.Reason, end.Message)
	}
	if end.FinishedAt.Before(*warned.IdleEndsAt) {
		t.Errorf("ended at %v, before the warned %v", end.FinishedAt, warned.IdleEndsAt)
	}
	if j := s.job(b.ID); j.State != api.StateRunning {
		t.Errorf("batch job %s", j.State)
	}
	release(t, dir, "all")
}

// TestHoldCLI (holds count toward --max-interactive-gpus: raised to 16
// here): corral hold takes GPUs at once or fails (exit 1) when they
// are busy; corral hold --wait queues and returns once granted (after
// corral release frees the GPUs); corral release of the queued hold's job
// id ends it.
func TestHoldCLI(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node", "--max-interactive-gpus", "16")
	env := []string{"CORRAL_SERVER=" + s.URL}
	stdout, stderr, code := runCLI(t, env, "-o", "json", "hold", "--gpus", "8", "--duration", "1h", "--name", "all")
	var h api.Hold
	if code != 0 || json.Unmarshal([]byte(stdout), &h) != nil || len(h.Allocation) != 8 || h.ExpiresAt == nil {
		t.Fatalf("corral hold --gpus 8: exit %d, %s %s", code, stdout, stderr)
	}
	if _, stderr, code := runCLI(t, env, "hold", "--gpus", "1", "--name", "more"); code != 1 || !strings.Contains(stderr, "wait") {
		t.Errorf("corral hold on a full cluster: exit %d, %q; want 1 and a hint at --wait", code, stderr)
	}
	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() {
		o, e, c := runCLI(t, env, "hold", "--gpus", "2", "--wait", "--duration", "1h", "--name", "later")
		done <- result{o, e, c}
	}()
	var queued api.Job
	waitFor(t, 20*time.Second, func() string { return "the hold later to be queued" }, func() bool {
		for _, j := range s.jobs() {
			if j.Hold == "later" {
				queued = j
				return true
			}
		}
		return false
	})
	if _, stderr, code := runCLI(t, env, "release", "all"); code != 0 {
		t.Fatalf("corral release all: exit %d: %s", code, stderr)
	}
	r := <-done
	if r.code != 0 || !strings.Contains(r.stdout, "hold later (job "+queued.ID+"): 2 GPUs") || !strings.Contains(r.stderr, "queued as job "+queued.ID) {
		t.Fatalf("corral hold --wait: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, stderr, code := runCLI(t, env, "release", queued.ID); code != 0 {
		t.Fatalf("corral release %s: exit %d: %s", queued.ID, code, stderr)
	}
	if j := s.waitTerminal(queued.ID, 20*time.Second); j.State != api.StateCanceled {
		t.Errorf("released queued hold: %s", j.State)
	}
}
