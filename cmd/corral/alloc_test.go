package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// TestAllocRequest: corral alloc submits a job of class interactive that
// holds its GPUs, with --time (default 8h) as its time limit.
func TestAllocRequest(t *testing.T) {
	for _, tc := range []struct {
		name            string
		args            []string
		wantTime, limit string
	}{
		{"defaults", []string{"alloc", "--gpus", "1"}, `"8h"`, `"8h"`},
		{"--time", []string{"alloc", "--gpus", "2", "--time", "2h"}, `"2h"`, `"2h"`},
		{"-t in Slurm's form", []string{"alloc", "--gpus", "2", "-t", "1:30:00"}, `"1:30:00"`, `"1:30:00"`},
		{"a bare -t is minutes", []string{"alloc", "-t", "90"}, `"1h30m0s"`, `"1h30m0s"`},
		{"--estimate apart", []string{"alloc", "--time", "3h", "--estimate", "1h"}, `"1h"`, `"3h"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			// A job that has ended already: alloc stops after the submit.
			f.on("POST", "/queue/submit", 201, api.Job{ID: "j1", State: api.StateCanceled, Priority: api.PriorityNormal})
			res := f.run(tc.args...)
			if res.code != exitError || !strings.Contains(res.stderr, "before it started") {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			var req api.SubmitRequest
			if err := json.Unmarshal(f.lastTo("/queue/submit").Body, &req); err != nil {
				t.Fatal(err)
			}
			if req.Class != api.ClassInteractive || req.Command != allocHold || string(req.EstimatedDuration) != tc.wantTime || string(req.TimeLimit) != tc.limit {
				t.Fatalf("submitted class %q command %q time %s limit %s; want interactive, %q, %s, %s",
					req.Class, req.Command, req.EstimatedDuration, req.TimeLimit, allocHold, tc.wantTime, tc.limit)
			}
		})
	}
}

// TestShellRefused: a refusal of the shell route is the API's message and
// exit 1, before any terminal is touched.
func TestShellRefused(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/jobs/j1/shell", 409, api.ErrorBody{Error: api.ErrorDetail{Code: "not_running", Message: "job j1 is queued: a shell or port stream needs a running job"}})
	res := f.run("shell", "j1", "--", "true")
	if res.code != exitError || !strings.Contains(res.stderr, "is queued") {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	r := f.lastTo("/jobs/j1/shell")
	if !strings.Contains(r.Query, "cmd=true") || !strings.Contains(r.Query, "tty=false") {
		t.Fatalf("query %q: want cmd=true and tty=false", r.Query)
	}
	if res := f.run("shell", "j1", "--rank", "1", "--", "sh", "-c", "exit 3"); !strings.Contains(f.lastTo("/jobs/j1/shell").Query, "rank=1") {
		t.Fatalf("--rank 1 after the job: exit %d, query %q", res.code, f.lastTo("/jobs/j1/shell").Query)
	}
	if res := f.run("shell", "j1", "--rank", "-1"); res.code != exitUsage {
		t.Fatalf("--rank -1: exit %d, want %d", res.code, exitUsage)
	}
}

// TestAllocRefusesImage: an allocation's shell runs on the node, not in
// an image, so corral alloc refuses --image (and --mount) before
// submitting anything, saying what to do instead.
func TestAllocRefusesImage(t *testing.T) {
	for _, args := range [][]string{
		{"alloc", "--gpus", "1", "--image", "localhost/x:1"},
		{"alloc", "--image", "localhost/x:1", "--mount", "/data:/data", "--", "python"},
	} {
		f := newFakeServer(t)
		res := f.run(args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, "--image") || !strings.Contains(res.stderr, "corral submit --image") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming --image and what to do", args, res.code, res.stderr)
		}
		if len(f.requests()) != 0 {
			t.Errorf("%v: %d requests were sent", args, len(f.requests()))
		}
	}
}
