package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corral-sched/corral/internal/api"
)

// lastTo returns the latest request to path, failing the test when there
// was none.
func (f *fakeServer) lastTo(path string) seen {
	f.t.Helper()
	reqs := f.requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == path {
			return reqs[i]
		}
	}
	f.t.Fatalf("the server got no request to %s", path)
	return seen{}
}

func TestJobExitCode(t *testing.T) {
	job := func(state api.State, code *int) api.Job {
		return api.Job{ID: "j1", Priority: api.PriorityNormal, State: state, ExitCode: code}
	}
	for _, tc := range []struct {
		name string
		job  api.Job
		want int
	}{
		{"completed", job(api.StateCompleted, ptr(0)), 0},
		{"completed without an exit code", job(api.StateCompleted, nil), 0},
		{"failed with its exit code", job(api.StateFailed, ptr(7)), 7},
		{"failed by a signal", job(api.StateFailed, ptr(137)), 137},
		{"failed without an exit code", job(api.StateFailed, nil), 1},
		{"failed with exit code 0 (time limit, oom)", job(api.StateFailed, ptr(0)), 1},
		{"failed with a negative exit code (could not start)", job(api.StateFailed, ptr(-1)), 1},
		{"failed with an exit code past 255", job(api.StateFailed, ptr(256)), 1},
		{"canceled", job(api.StateCanceled, ptr(143)), 130},
		{"canceled while queued", job(api.StateCanceled, nil), 130},
		{"not ended", job(api.StateRunning, nil), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jobExitCode(tc.job); got != tc.want {
				t.Errorf("jobExitCode(%s, %v) = %d, want %d", tc.job.State, tc.job.ExitCode, got, tc.want)
			}
		})
	}
}

func TestJobsExitCode(t *testing.T) {
	ok := api.Job{State: api.StateCompleted}
	bad := api.Job{State: api.StateFailed, ExitCode: ptr(5)}
	gone := api.Job{State: api.StateCanceled}
	for _, tc := range []struct {
		name string
		jobs []api.Job
		want int
	}{
		{"none", nil, 0},
		{"all completed", []api.Job{ok, ok}, 0},
		{"failed first", []api.Job{ok, bad, gone}, 5},
		{"canceled first", []api.Job{gone, bad}, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jobsExitCode(tc.jobs); got != tc.want {
				t.Errorf("jobsExitCode = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWaitCmd(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/jobs/jok", 200, api.Job{ID: "jok", Priority: api.PriorityNormal, State: api.StateCompleted, ExitCode: ptr(0)})
	f.on("GET", "/jobs/jrun", 200, api.Job{ID: "jrun", Priority: api.PriorityNormal, State: api.StateRunning})
	f.on("GET", "/jobs/jbad", 200, api.Job{ID: "jbad", Priority: api.PriorityNormal, State: api.StateFailed, ExitCode: ptr(9), Reason: "nonzero_exit"})
	for _, tc := range []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{[]string{"wait", "jok"}, 0, "job jok completed", ""},
		{[]string{"wait", "jok", "jbad"}, 9, "job jbad failed (exit 9, reason nonzero_exit)", ""},
		{[]string{"wait", "jnone"}, 1, "", "jnone"},
		{[]string{"wait", "jok", "jnone"}, 1, "", "jnone"},
		{[]string{"wait", "jrun", "jnone"}, 1, "", "jnone"}, // at once, not after jrun ends (never)
		{[]string{"wait"}, 2, "", "missing the job IDs"},
		{[]string{"wait", "--retry", "-1s", "jok"}, 2, "", "--retry"},
		{[]string{"logs", "-f", "--retry", "-1s", "jok"}, 2, "", "--retry"},
	} {
		r := f.run(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.inStdout) || !strings.Contains(r.stderr, tc.inStderr) {
			t.Errorf("corral %v: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.inStdout, tc.inStderr)
		}
	}
}

func TestLogsFollowExitsAsTheJob(t *testing.T) {
	f := newFakeServer(t)
	f.on("GET", "/jobs/j3/logs", 200, "out\n")
	f.on("GET", "/jobs/j3", 200, api.Job{ID: "j3", Priority: api.PriorityNormal, State: api.StateFailed, ExitCode: ptr(3)})
	r := f.run("logs", "-f", "j3")
	if r.code != 3 || r.stdout != "out\n" || !strings.Contains(r.stderr, "job j3 failed (exit 3)") {
		t.Errorf("logs -f of a job that failed with 3: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Without -f: a plain read, exit 0.
	if r := f.run("logs", "j3"); r.code != 0 || r.stdout != "out\n" {
		t.Errorf("logs (no -f): exit %d, stdout %q", r.code, r.stdout)
	}
	if q := f.last().Query; strings.Contains(q, "follow") {
		t.Errorf("logs (no -f) asked to follow: %q", q)
	}
}

func TestSubmitWait(t *testing.T) {
	f := newFakeServer(t)
	f.on("POST", "/queue/submit", 201, api.Job{ID: "j4", Priority: api.PriorityNormal, State: api.StateQueued})
	f.on("GET", "/jobs/j4", 200, api.Job{ID: "j4", Priority: api.PriorityNormal, State: api.StateCanceled})
	r := f.run("submit", "--wait", "--", "true")
	if r.code != 130 || !strings.Contains(r.stdout, "submitted job j4") || !strings.Contains(r.stderr, "job j4 canceled") {
		t.Errorf("submit --wait of a job that ends canceled: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := f.run("submit", "--wait", "--retry", "-1s", "--", "true"); r.code != 2 {
		t.Errorf("submit --retry -1s: exit %d, want 2 (nothing submitted)", r.code)
	}
}

// TestWaitResolvesPrefixOnce: corral wait and logs -f given an id prefix
// ask the server once with it, then only by the full id it answered, so a
// later job that shares the prefix cannot make it ambiguous mid-wait.
func TestWaitResolvesPrefixOnce(t *testing.T) {
	f := newFakeServer(t)
	done := api.Job{ID: "01JPREFIXFULLID", State: api.StateCompleted, Priority: api.PriorityNormal, ExitCode: new(int)}
	f.on("GET", "/jobs/01JPREF", http.StatusOK, done)
	f.on("GET", "/jobs/01JPREFIXFULLID", http.StatusOK, done)
	f.on("GET", "/jobs/01JPREFIXFULLID/logs", http.StatusOK, "out\n")
	for _, args := range [][]string{{"wait", "01JPREF"}, {"logs", "-f", "01JPREF"}} {
		before := len(f.requests())
		if res := f.run(args...); res.code != 0 {
			t.Fatalf("%v: exit %d, %q", args, res.code, res.stderr)
		}
		reqs := f.requests()[before:]
		if reqs[0].Path != "/jobs/01JPREF" {
			t.Errorf("%v: first asked %s", args, reqs[0].Path)
		}
		for _, r := range reqs[1:] {
			if strings.Contains(r.Path, "01JPREF/") || strings.HasSuffix(r.Path, "01JPREF") {
				t.Errorf("%v: asked %s after the id was resolved", args, r.Path)
			}
		}
	}
}
