package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

// TestElasticGPUs drives elastic GPU counts through the real binary on 8
// simulated GPUs: on a half-full cluster `corral submit --gpus 4-8` starts
// with the 4 free GPUs and its CORRAL_NUM_GPUS says 4; a job whose
// --elastic-wait has not passed waits for its maximum (shown as 6-8 in
// corral queue); with a short --elastic-wait the job waits at least that
// long, then takes the 4; on an empty cluster `corral run --gpus 2-8`
// gets all 8. Every job, elastic or not, has CORRAL_NUM_GPUS.
func TestElasticGPUs(t *testing.T) {
	s := startServer(t)
	env := []string{"CORRAL_SERVER=" + s.URL}
	submitCLI := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := runCLI(t, env, append([]string{"submit", "-o", "json", "--workdir", "/tmp"}, args...)...)
		var j api.Job
		if code != 0 || json.Unmarshal([]byte(stdout), &j) != nil || j.ID == "" {
			t.Fatalf("corral submit %v: exit %d, %q %q", args, code, stdout, stderr)
		}
		return j.ID
	}

	// Half full: a plain 4-GPU job holds GPUs, and sees CORRAL_NUM_GPUS=4.
	blocker := s.submit(map[string]any{"command": "echo plain=$CORRAL_NUM_GPUS; sleep 600", "gpu_count": 4, "workdir": "/tmp"})
	s.waitState(blocker.ID, api.StateRunning, 30*time.Second)
	waitFor(t, 10*time.Second, func() string { return "the plain job's output" }, func() bool {
		return strings.Contains(s.logs(blocker.ID), "plain=4")
	})

	id := submitCLI("--gpus", "4-8", "--", "echo n=$CORRAL_NUM_GPUS cuda=$CUDA_VISIBLE_DEVICES")
	j := s.waitTerminal(id, 30*time.Second)
	out := s.logs(id)
	if j.State != api.StateCompleted || j.GrantedGPUs != 4 || j.GPUCountMin != 4 || j.GPUCount != 8 || !strings.Contains(out, "n=4 ") {
		t.Fatalf("elastic job on a half-full cluster: %s granted %d (%d-%d), output %q", j.State, j.GrantedGPUs, j.GPUCountMin, j.GPUCount, out)
	}
	cuda := strings.TrimSpace(out[strings.Index(out, "cuda=")+len("cuda="):])
	if gs, err := parseGPUList(cuda); err != nil || len(gs) != 4 {
		t.Fatalf("CUDA_VISIBLE_DEVICES = %q, want 4 GPUs", cuda)
	}
	stdout, _, _ := runCLI(t, env, "jobs")
	if !strings.Contains(stdout, "4 (4-8)") {
		t.Errorf("corral jobs does not show the grant of 4 of 4-8:\n%s", stdout)
	}

	// Within its wait it waits for its maximum: one row of 6-8 in the queue.
	patient := submitCLI("--gpus", "6-8", "--elastic-wait", "1h", "--", "true")
	stdout, stderr, code := runCLI(t, env, "queue")
	if code != 0 || !strings.Contains(stdout, "6-8") {
		t.Errorf("corral queue: exit %d, want a row of 6-8:\n%s%s", code, stdout, stderr)
	}
	stdout, _, _ = runCLI(t, env, "show", patient)
	if !strings.Contains(stdout, "elastic 6-8, waits up to 1h") {
		t.Errorf("corral show of the elastic job:\n%s", stdout)
	}
	if p := s.job(patient); p.State != api.StateQueued || p.PendingReason != "insufficient_gpus" {
		t.Errorf("the patient job is %s (%s), want queued for GPUs", p.State, p.PendingReason)
	}
	if _, stderr, code := runCLI(t, env, "cancel", patient); code != 0 {
		t.Fatalf("cancel: %s", stderr)
	}
	s.waitTerminal(patient, 30*time.Second)

	// A short wait: it waits at least that long, then takes the 4.
	short := submitCLI("--gpus", "4-8", "--elastic-wait", "2s", "--", "echo n=$CORRAL_NUM_GPUS")
	j = s.waitTerminal(short, 30*time.Second)
	if j.State != api.StateCompleted || j.GrantedGPUs != 4 || j.StartedAt == nil || !strings.Contains(s.logs(short), "n=4") {
		t.Fatalf("elastic job after its wait: %s granted %d, output %q", j.State, j.GrantedGPUs, s.logs(short))
	}
	if waited := j.StartedAt.Sub(j.SubmittedAt); waited < 2*time.Second {
		t.Errorf("started %v after submission, before its 2s elastic wait was over", waited)
	}

	// An empty cluster: the maximum, through corral run.
	if _, stderr, code := runCLI(t, env, "cancel", blocker.ID); code != 0 {
		t.Fatalf("cancel: %s", stderr)
	}
	s.waitAllGPUsFree(30 * time.Second)
	stdout, stderr, code = runCLI(t, env, "run", "--gpus", "2-8", "--workdir", "/tmp", "--", "echo n=$CORRAL_NUM_GPUS")
	if code != 0 || !strings.Contains(stdout, "n=8") {
		t.Fatalf("corral run --gpus 2-8 on an empty cluster: exit %d, %q %q", code, stdout, stderr)
	}
}

// TestElasticBadInput: a bad elastic request is refused with 422 naming
// the field (API) or a usage error (CLI), and queues nothing.
func TestElasticBadInput(t *testing.T) {
	s := startServer(t)
	tests := map[string]struct {
		body  map[string]any
		field string
	}{
		"min above max":        {map[string]any{"gpu_count": 4, "gpu_count_min": 8}, "gpu_count_min"},
		"min of zero":          {map[string]any{"gpu_count": 4, "gpu_count_min": 0}, "gpu_count_min"},
		"a gang":               {map[string]any{"gpu_count": 4, "gpu_count_min": 2, "nodes": 2}, "gpu_count_min"},
		"a wait without range": {map[string]any{"gpu_count": 4, "elastic_wait": "10m"}, "elastic_wait"},
		"a bad wait":           {map[string]any{"gpu_count": 4, "gpu_count_min": 2, "elastic_wait": "later"}, "elastic_wait"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.body["command"] = "true"
			r := s.do("POST", "/queue/submit", tc.body, nil)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r)
			}
			if e := errorBody(t, r); e.Field != tc.field {
				t.Fatalf("field %q, want %q (%s)", e.Field, tc.field, e.Message)
			}
		})
	}
	env := []string{"CORRAL_SERVER=" + s.URL}
	for _, args := range [][]string{{"--gpus", "8-4"}, {"--gpus", "4", "--elastic-wait", "1m"}, {"--gpus", "2-4", "--elastic-wait", "soon"}} {
		if _, stderr, code := runCLI(t, env, append(append([]string{"submit"}, args...), "--", "true")...); code != 2 || stderr == "" {
			t.Errorf("corral submit %v: exit %d, %q; want a usage error (exit 2)", args, code, stderr)
		}
	}
	if js := s.jobs(); len(js) != 0 {
		t.Fatalf("bad requests queued %d jobs", len(js))
	}
}
