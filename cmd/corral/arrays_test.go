package main

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-sched/corral/internal/api"
)

const testArrayID = "j01karrayaaaaaaaaaaaaaaaaaa"

func arrayQueue() api.QueueResponse {
	now := time.Now()
	q := api.QueueResponse{QueuedJobs: []api.QueuedJob{{ID: "j01kplainjob00000000000000", User: "bob", Priority: api.PriorityNormal, RequestedGPUs: 1, Nodes: 1, QueuedAt: now, QueuePosition: 1}}}
	for i := range 3 {
		q.QueuedJobs = append(q.QueuedJobs, api.QueuedJob{ID: testArrayID + "_" + string(rune('0'+i)), User: "ana", Priority: api.PriorityNormal,
			RequestedGPUs: 1, Nodes: 1, QueuedAt: now, QueuePosition: 2, ArrayJobID: testArrayID, ArrayTaskID: &[]int{0, 1, 2}[i]})
	}
	q.Arrays = []api.Array{{ID: testArrayID, Array: "0-9%3", TaskCount: 10, Throttle: 2, // the throttle changed since
		Priority: api.PriorityNormal, Counts: api.ArrayCounts{Queued: 3, Running: 2, Completed: 4, Failed: 1}}}
	q.Statistics.TotalQueued = 4
	return q
}

// TestQueueArrayRow: corral queue shows an array as one row with its
// counts; --expand lists its tasks; corral queue ARRAYID lists that
// array's tasks alone.
func TestQueueArrayRow(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/queue", 200, arrayQueue())
	f.on("GET", "/jobs", 200, api.JobList{})
	f.on("GET", "/arrays/j01karray", 200, api.Array{ID: testArrayID, Priority: api.PriorityNormal})
	for _, tc := range []struct {
		args  []string
		rows  int
		tasks bool // the TASKS column
	}{
		{[]string{"queue"}, 2, true},
		{[]string{"queue", "--expand"}, 4, false},
		{[]string{"queue", "j01karray"}, 3, false},
	} {
		res := f.run(tc.args...)
		if res.code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, res.code, res.stderr)
		}
		lines := strings.Split(strings.TrimRight(res.stdout, "\n"), "\n")
		if got := len(lines) - 2; got != tc.rows { // header and statistics
			t.Fatalf("%v: %d rows, want %d:\n%s", tc.args, got, tc.rows, res.stdout)
		}
		if has := strings.Contains(lines[0], "TASKS"); has != tc.tasks {
			t.Fatalf("%v: TASKS column %v, want %v:\n%s", tc.args, has, tc.tasks, res.stdout)
		}
		if tc.tasks && !strings.Contains(res.stdout, "[0-9%2] 3 queued, 2 running, 4 completed, 1 failed") {
			t.Fatalf("%v: the array row has no counts:\n%s", tc.args, res.stdout)
		}
		if tc.tasks && strings.Count(res.stdout, testArrayID) != 1 {
			t.Fatalf("%v: the array's whole id is not on exactly one line:\n%s", tc.args, res.stdout)
		}
	}
}

// TestCancelArrayID: corral cancel ARRAYID cancels the array through
// DELETE /arrays/{id}, counting its unfinished tasks toward --yes.
func TestCancelArrayID(t *testing.T) {
	f := newFakeServer(t)
	a := api.Array{ID: testArrayID, Priority: api.PriorityNormal, Counts: api.ArrayCounts{Queued: 12, Running: 2}}
	f.on("GET", "/arrays/j01karray", 200, a)
	done := a
	done.Counts = api.ArrayCounts{Canceled: 12, Running: 2}
	f.on("DELETE", "/arrays/"+testArrayID, 202, done)
	res := f.run("cancel", "j01karray")
	if res.code == 0 || !strings.Contains(res.stderr, "would cancel 14 jobs") {
		t.Fatalf("14 tasks without --yes: exit %d, %q", res.code, res.stderr)
	}
	for _, r := range f.requests() {
		if r.Method == "DELETE" {
			t.Fatalf("canceled without --yes: %v", r)
		}
	}
	res = f.run("cancel", "--yes", "j01karray")
	if res.code != 0 || !strings.Contains(res.stdout, "canceled array "+testArrayID) {
		t.Fatalf("with --yes: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
}

// TestShowAndWaitArrayID: corral show ARRAYID shows the array; corral wait
// ARRAYID waits for every task and exits as the first that did not
// complete.
func TestShowAndWaitArrayID(t *testing.T) {
	f := newFakeServer(t)
	isArray := api.ErrorBody{Error: api.ErrorDetail{Code: "is_array", Message: "a job array"}}
	f.on("GET", "/jobs/j01karray", 404, isArray)
	f.on("GET", "/arrays/j01karray", 200, api.Array{ID: testArrayID, Array: "0-1", TaskCount: 2, Tasks: []int{0, 1},
		Priority: api.PriorityNormal, Counts: api.ArrayCounts{Completed: 1, Failed: 1}})
	res := f.run("show", "j01karray")
	if res.code != 0 || !strings.Contains(res.stdout, "0-1: 2 tasks") || !strings.Contains(res.stdout, "1 completed, 1 failed") {
		t.Fatalf("corral show ARRAYID: exit %d %q %q", res.code, res.stdout, res.stderr)
	}
	seven := 7
	for i, st := range []api.State{api.StateCompleted, api.StateFailed} {
		j := api.Job{ID: testArrayID + "_" + string(rune('0'+i)), State: st, Priority: api.PriorityNormal, ArrayJobID: testArrayID}
		if st == api.StateFailed {
			j.ExitCode = &seven
		}
		f.on("GET", "/jobs/"+j.ID, 200, j)
	}
	res = f.run("wait", "j01karray")
	if res.code != 7 || strings.Count(res.stdout, "job "+testArrayID+"_") != 2 {
		t.Fatalf("corral wait ARRAYID: exit %d (want 7, the failed task's) %q %q", res.code, res.stdout, res.stderr)
	}
}
