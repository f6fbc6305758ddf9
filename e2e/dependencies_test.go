package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corral-sched/corral/internal/api"
)

// submitCLI submits with `corral submit -o json ARGS...` and returns the
// job.
func submitCLI(t *testing.T, s *server, args ...string) api.Job {
	t.Helper()
	stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, append([]string{"submit", "-o", "json", "--workdir", "/tmp"}, args...)...)
	if code != 0 {
		t.Fatalf("corral submit %v: exit %d, %s", args, code, stderr)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("corral submit -o json: %v: %q", err, stdout)
	}
	return j
}

// TestDependencyPipeline: a three-stage pipeline submitted with the CLI
// (--after and its alias -d): stage 1, an afterok branch, an afternotok
// branch, and a third stage after the afterok branch. When stage 1 fails
// the afternotok branch runs, while the afterok branch and the stage
// behind it get dependency_never_satisfied and are canceled after the
// server's --dependency-timeout; when it succeeds, the other way round.
func TestDependencyPipeline(t *testing.T) {
	s := startControl(t, t.TempDir(), freePort(t), nil, "up", "--simulate-gpus", "8", "--node-name", "e2e-node", "--dependency-timeout", "3s")
	env := []string{"CORRAL_SERVER=" + s.URL}
	for _, c := range []struct {
		name    string
		stage1  string
		runs    string // the branch that runs: "ok" or "notok"
		doomed  string
		culprit string // what the doomed branch's message says stage 1 did
	}{
		{"stage 1 fails", "sleep 3; exit 3", "notok", "ok", "failed"},
		{"stage 1 succeeds", "sleep 3", "ok", "notok", "completed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := s.on(t)
			first := submitCLI(t, s, "--name", "prep", "--gpus", "1", "--", c.stage1)
			branch := map[string]api.Job{
				"ok":    submitCLI(t, s, "--name", "train", "--gpus", "1", "--after", "afterok:"+first.ID[:10], "--", "echo trained"),
				"notok": submitCLI(t, s, "--name", "rescue", "--gpus", "1", "-d", "afternotok:"+first.ID, "--", "echo rescued"),
			}
			third := submitCLI(t, s, "--name", "eval", "--gpus", "0", "--dependency", "afterok:"+branch["ok"].ID, "--", "echo evaluated")
			if got := branch["ok"].DependsOn; got != "afterok:"+first.ID {
				t.Fatalf("depends_on = %q, want the prefix resolved to %s", got, first.ID)
			}

			// While stage 1 runs (3 s), the branches wait with reason
			// dependency, shown by corral show and corral queue -l.
			if j := branch["ok"]; j.PendingReason != api.ReasonDependency {
				t.Errorf("submitted afterok branch: pending %q (%s), want dependency", j.PendingReason, j.PendingMessage)
			}
			out, _, _ := runCLI(t, env, "show", branch["ok"].ID)
			if !strings.Contains(out, "Depends on:") || !strings.Contains(out, "afterok:"+first.ID) || !strings.Contains(out, "dependency: waits for job "+first.ID) {
				t.Errorf("corral show of a waiting job:\n%s", out)
			}
			out, _, _ = runCLI(t, env, "queue", "-l")
			if !strings.Contains(out, "waits for job "+first.ID+" (afterok) to complete") {
				t.Errorf("corral queue -l does not say what the job waits for:\n%s", out)
			}
			out, _, _ = runCLI(t, env, "queue")
			if !strings.Contains(out, "(dependency)") {
				t.Errorf("corral queue does not mark the held jobs:\n%s", out)
			}

			s.waitTerminal(first.ID, 30*time.Second)
			if j := s.waitTerminal(branch[c.runs].ID, 30*time.Second); j.State != api.StateCompleted {
				t.Fatalf("the %s branch ended %s (%s: %s)", c.runs, j.State, j.Reason, j.Message)
			}
			doomed := s.waitJob(branch[c.doomed].ID, 30*time.Second, "to be held as never satisfied or canceled", func(j api.Job) bool {
				return j.PendingReason == api.ReasonDependencyNeverSatisfied || j.State.Terminal()
			})
			if doomed.State == api.StateQueued && !strings.Contains(doomed.PendingMessage, "job "+first.ID+" can never be met: it "+c.culprit) {
				t.Errorf("never-satisfied message %q", doomed.PendingMessage)
			}
			doomed = s.waitState(branch[c.doomed].ID, api.StateCanceled, 30*time.Second)
			if e := lastEvent(t, doomed); e.Reason != api.ReasonDependencyNeverSatisfied || !strings.Contains(e.Message, first.ID) {
				t.Errorf("the %s branch's canceled event: %+v", c.doomed, e)
			}
			if doomed.StartedAt != nil {
				t.Errorf("the %s branch ran", c.doomed)
			}
			want := api.StateCompleted
			if c.runs == "notok" {
				want = api.StateCanceled // its afterok predecessor was canceled
			}
			if j := s.waitTerminal(third.ID, 30*time.Second); j.State != want {
				t.Errorf("stage 3 ended %s (%s: %s), want %s", j.State, j.Reason, j.Message, want)
			} else if want == api.StateCanceled && lastEvent(t, j).Reason != api.ReasonDependencyNeverSatisfied {
				t.Errorf("stage 3 canceled with %+v", lastEvent(t, j))
			}
		})
	}
}

// TestDependencySingletonAndAnyOf: singleton jobs of one user and name run
// one at a time; a '?' any-of job runs when one of its predecessors has
// completed while the other still runs.
func TestDependencySingletonAndAnyOf(t *testing.T) {
	s := startServer(t)
	var syncs []api.Job
	for range 3 {
		syncs = append(syncs, submitCLI(t, s, "--name", "sync", "--gpus", "0", "--after", "singleton", "--", "sleep 0.5"))
	}
	for i := 1; i < len(syncs); i++ {
		prev, cur := s.waitTerminal(syncs[i-1].ID, 30*time.Second), s.waitTerminal(syncs[i].ID, 30*time.Second)
		if prev.State != api.StateCompleted || cur.State != api.StateCompleted {
			t.Fatalf("singleton jobs ended %s and %s", prev.State, cur.State)
		}
		if cur.StartedAt.Before(*prev.FinishedAt) {
			t.Errorf("singleton job %s started at %s, before %s ended at %s", cur.ID, cur.StartedAt, prev.ID, prev.FinishedAt)
		}
	}

	slow := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 1, "workdir": "/tmp"})
	quick := s.submit(map[string]any{"command": "true", "gpu_count": 1, "workdir": "/tmp"})
	either := submitCLI(t, s, "--gpus", "0", "--after", "afterok:"+slow.ID+"?afterok:"+quick.ID, "--", "echo either")
	if j := s.waitTerminal(either.ID, 30*time.Second); j.State != api.StateCompleted {
		t.Fatalf("any-of job ended %s (%s)", j.State, j.Message)
	}
	if j := s.job(slow.ID); j.State.Terminal() {
		t.Fatalf("the slow predecessor ended (%s) before the any-of job ran", j.State)
	}
}

// TestDependencyRefused: an unknown id, bad syntax and aftercorr on a job
// are refused with 422 naming depends_on, by the API and through the CLI,
// and queue nothing.
func TestDependencyRefused(t *testing.T) {
	s := startServer(t)
	known := s.submit(map[string]any{"command": "true", "gpu_count": 0, "workdir": "/tmp"})
	for _, expr := range []string{"afterok:jnosuchjob0000", "afterok:" + known.ID + ":jnosuchjob0000", "afterok", "afterok:" + known.ID + ",after:" + known.ID + "?afterany:" + known.ID, "aftercorr:" + known.ID} {
		r := s.do("POST", "/queue/submit", map[string]any{"command": "true", "depends_on": expr}, nil)
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("depends_on %q: %s, want 422", expr, r)
			continue
		}
		if e := errorBody(t, r); e.Field != "depends_on" {
			t.Errorf("depends_on %q: error names %q, want depends_on", expr, e.Field)
		}
	}
	_, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "submit", "--after", "afterok:jnosuchjob0000", "--", "true")
	if code == 0 || !strings.Contains(stderr, "depends_on") || !strings.Contains(stderr, "jnosuchjob0000") {
		t.Errorf("corral submit --after an unknown id: exit %d, %q", code, stderr)
	}
	if n := len(s.jobs()); n != 1 {
		t.Errorf("%d jobs after the refusals, want 1", n)
	}
	// A cycle through the update route is refused too.
	s.do("POST", "/orchestrator/stop", nil, nil)
	b := s.submit(map[string]any{"command": "true", "depends_on": "afterok:" + known.ID, "workdir": "/tmp"})
	c := s.submit(map[string]any{"command": "true", "depends_on": "afterany:" + b.ID, "workdir": "/tmp"})
	_, stderr, code = runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "depend", b.ID, "afterok:"+c.ID)
	if code == 0 || !strings.Contains(stderr, "would make a cycle") {
		t.Errorf("corral depend making a cycle: exit %d, %q", code, stderr)
	}
	stdout, stderr, code := runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "depend", c.ID, "afterok:"+known.ID)
	if code != 0 || !strings.Contains(stdout, "now depends on afterok:"+known.ID) || s.job(c.ID).DependsOn != "afterok:"+known.ID {
		t.Errorf("corral depend: exit %d, %q %q", code, stdout, stderr)
	}
	if stdout, _, code = runCLI(t, []string{"CORRAL_SERVER=" + s.URL}, "depend", c.ID, "none"); code != 0 || s.job(c.ID).DependsOn != "" {
		t.Errorf("corral depend none: exit %d, %q", code, stdout)
	}
}

// TestDependencySurvivesRestart: a job waiting on another is still held
// after the server restarts, and runs once its predecessor completes.
func TestDependencySurvivesRestart(t *testing.T) {
	s := startServer(t)
	s.do("POST", "/orchestrator/stop", nil, nil)
	first := s.submit(map[string]any{"command": "sleep 2", "gpu_count": 1, "workdir": "/tmp"})
	next := s.submit(map[string]any{"command": "echo next", "gpu_count": 1, "workdir": "/tmp", "depends_on": "afterok:" + first.ID[:12]})
	s.stop()
	s2 := startServerAt(t, s.DataDir, s.Port)
	if j := s2.job(next.ID); j.DependsOn != "afterok:"+first.ID || j.State != api.StateQueued {
		t.Fatalf("after restart: %s depends_on %q", j.State, j.DependsOn)
	}
	s2.do("POST", "/orchestrator/start", nil, nil)
	s2.waitState(first.ID, api.StateRunning, 30*time.Second)
	if j := s2.job(next.ID); j.State != api.StateQueued || j.PendingReason != api.ReasonDependency {
		t.Errorf("while its predecessor runs: %s, pending %q", j.State, j.PendingReason)
	}
	done := s2.waitTerminal(next.ID, 30*time.Second)
	f := s2.job(first.ID)
	if done.State != api.StateCompleted || done.StartedAt.Before(*f.FinishedAt) {
		t.Errorf("next ended %s, started %v; first finished %v", done.State, done.StartedAt, f.FinishedAt)
	}
}

// TestDependencyDashboard: the dashboard's job page shows a waiting job's
// depends_on, each id a link to its job, and why it waits.
func TestDependencyDashboard(t *testing.T) {
	ctx := browser(t)
	s := startServer(t)
	first := s.submit(map[string]any{"command": "sleep 600", "gpu_count": 1, "workdir": "/tmp"})
	next := s.submit(map[string]any{"command": "true", "gpu_count": 1, "workdir": "/tmp", "depends_on": "afterok:" + first.ID})
	fields := `[data-role=fields]`
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/?token="+adminToken+"#/jobs/"+next.ID),
		chromedp.Click(chromedp.CSS(`[data-role=confirm-link] [data-act=switch]`)),
		chromedp.WaitVisible(chromedp.CSS(fields+` a[href="#/jobs/`+first.ID+`"]`)),
	)
	if err != nil {
		t.Fatalf("job page: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(fields)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Depends on") || !strings.Contains(text, "afterok:"+first.ID) || !strings.Contains(text, "waits for job "+first.ID+" (afterok) to complete") {
		t.Errorf("job page fields:\n%s", text)
	}
}

// TestDependencyTimeoutFlag: a negative --dependency-timeout is refused
// before the server starts, naming the flag.
func TestDependencyTimeoutFlag(t *testing.T) {
	for _, daemon := range []string{"server", "up"} {
		_, stderr, code := runCLI(t, nil, daemon, "--dependency-timeout", "-1s", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
		if code == 0 || !strings.Contains(stderr, "--dependency-timeout") {
			t.Errorf("corral %s --dependency-timeout -1s: exit %d, %q", daemon, code, stderr)
		}
	}
}
